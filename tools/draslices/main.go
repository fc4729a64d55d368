// Command draslices prints, as objects for kubectl, what the cpupool.dev
// DRA driver publishes for a node: the same code (dra.Offer, dra.WithMemory
// and dra.Resources) over a sysfs tree and a config, for a Node that has no
// kubelet of its own. The Kubernetes suite uses it to give the scheduler a
// multi-NUMA node on a machine with one NUMA node, and the scheduler scale
// run (test/k8s/scale.sh, issue 33) to give hundreds of kwok nodes the
// slices of real fixture shapes:
//
//	go run ./tools/draslices -sysfs-root DIR -config F -node NAME [-devices numaNode|cpu] | kubectl apply -f -
//	go run ./tools/draslices -fixture xeon-2s-gnr-snc3 -config F -node NAME [-nics-per-numa 4]
//	go run ./tools/draslices -cluster 500 -devices cpu -nics-per-numa 8 | kubectl create -f -
//
// -fixture renders testdata/topologies/NAME.yaml (or a spec's path) as
// tools/mksysfs does, in a temporary directory. -cluster N prints N Nodes
// for kwok (annotation kwok.x-k8s.io/node=fake) named scale-0..N-1, each
// with the shape of its turn in clusterShapes, its cpupool.dev slices and,
// with -nics-per-numa, a second driver's NICs (nic.example.com) with
// resource.kubernetes.io/numaNode, as dranet publishes them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// NICDriver is the second driver of the scale run: NICs (or their VFs)
// with the standard NUMA attribute, which claims align the CPUs with.
const NICDriver = "nic.example.com"

// clusterShapes are the machines a -cluster run mixes, node i taking shape
// i mod len: the fixtures and pools of the DRA tests (dra/scale_test.go
// bigSliceCases, testdata/configs/xeon.yaml), from 2 to 8 NUMA nodes and
// from 68 to 1,022 exclusive CPUs.
var clusterShapes = []struct{ fixture, config string }{
	{"xeon-2s-interleaved", "@testdata/configs/xeon.yaml"},
	{"xeon-2s-gnr-snc3", `isolatedCPUs: "4-239,244-479"`},
	{"epyc-2s-turin-nps4", "isolatedCPUs: \"4-383,388-767\"\npools: {exclusive-non-isolcpus: {enabled: true}}\n"},
	{"epyc-2s-1024", `isolatedCPUs: "1-511,513-1023"`},
}

func main() {
	root := flag.String("sysfs-root", "", "directory holding sys/ and proc/ (default /, unless -fixture)")
	fix := flag.String("fixture", "", "a testdata/topologies spec, by name or path, rendered as tools/mksysfs does")
	cfgPath := flag.String("config", "", "nri-cpupool config (empty: defaults)")
	node := flag.String("node", "", "the Node's name")
	devices := flag.String("devices", config.DRADevicesNUMANode, "device model: numaNode or cpu")
	nics := flag.Int("nics-per-numa", 0, "also print this many NIC devices of "+NICDriver+" per NUMA node")
	cluster := flag.Int("cluster", 0, "print this many kwok Nodes with their slices, mixing the shapes")
	flag.Parse()
	var err error
	if *cluster > 0 {
		err = runCluster(os.Stdout, *cluster, *devices, *nics)
	} else {
		err = run(os.Stdout, *root, *fix, *cfgPath, *node, *devices, *nics)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "draslices:", err)
		os.Exit(1)
	}
}

type list struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []any  `json:"items"`
}

func run(w io.Writer, root, fix, cfgPath, node, devices string, nics int) error {
	if node == "" {
		return fmt.Errorf("-node is required")
	}
	if root != "" && fix != "" {
		return fmt.Errorf("-sysfs-root and -fixture exclude each other")
	}
	cfg := config.Default()
	if cfgPath != "" {
		var err error
		if cfg, err = config.Load(cfgPath); err != nil {
			return err
		}
	}
	topo, err := discover(root, fix)
	if err != nil {
		return err
	}
	items, err := nodeSlices(topo, cfg, node, devices, nics)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(list{APIVersion: "v1", Kind: "List", Items: items})
}

// runCluster prints n kwok Nodes named scale-<i> with their slices.
func runCluster(w io.Writer, n int, devices string, nics int) error {
	type shape struct {
		topo *sysfs.Topology
		cfg  *config.Config
	}
	var shapes []shape
	for _, s := range clusterShapes {
		topo, err := discover("", s.fixture)
		if err != nil {
			return err
		}
		var cfg *config.Config
		if path, ok := strings.CutPrefix(s.config, "@"); ok {
			dir, err := fixture.SpecDir()
			if err != nil {
				return err
			}
			cfg, err = config.Load(filepath.Join(dir, "..", "..", path))
			if err != nil {
				return err
			}
		} else if cfg, err = config.Parse(strings.NewReader(s.config), s.fixture+".yaml"); err != nil {
			return err
		}
		shapes = append(shapes, shape{topo, cfg})
	}
	// One object a line inside the List: 500 nodes in the cpu model are
	// some 300,000 devices.
	if _, err := io.WriteString(w, `{"apiVersion": "v1", "kind": "List", "items": [`+"\n"); err != nil {
		return err
	}
	first := true
	for i := range n {
		s := shapes[i%len(shapes)]
		name := "scale-" + strconv.Itoa(i)
		items, err := nodeSlices(s.topo, s.cfg, name, devices, nics)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", name, clusterShapes[i%len(shapes)].fixture, err)
		}
		items = append([]any{kwokNode(name, s.topo)}, items...)
		for _, it := range items {
			data, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if !first {
				data = append([]byte(",\n"), data...)
			}
			first = false
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
	}
	_, err := io.WriteString(w, "\n]}\n")
	return err
}

// discover reads a sysfs root, or renders a fixture spec and reads that.
func discover(root, fix string) (*sysfs.Topology, error) {
	if fix == "" {
		if root == "" {
			root = "/"
		}
		return sysfs.Discover(root)
	}
	path := fix
	if !strings.HasSuffix(path, ".yaml") {
		dir, err := fixture.SpecDir()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, fix+".yaml")
	}
	spec, err := fixture.LoadSpec(path)
	if err != nil {
		return nil, err
	}
	// tmpfs where there is one, as fixture.Root: thousands of small files.
	tmp, err := os.MkdirTemp("/dev/shm", "draslices-")
	if err != nil {
		if tmp, err = os.MkdirTemp("", "draslices-"); err != nil {
			return nil, err
		}
	}
	defer os.RemoveAll(tmp)
	if err := spec.Write(tmp); err != nil {
		return nil, err
	}
	return sysfs.Discover(tmp)
}

// nodeSlices is what the driver would publish for a node (the driver's own
// code over the topology and config), and the NICs, nics per NUMA node.
func nodeSlices(topo *sysfs.Topology, cfg *config.Config, node, devices string, nics int) ([]any, error) {
	pools, err := dra.NewStatic(topo, cfg)
	if err != nil {
		return nil, err
	}
	t, layout := pools.Layout()
	res := dra.Resources(node, devices, dra.WithMemory(dra.Offer(t, layout, nil), pools.MemoryOffer()))
	var items []any
	for _, name := range slices.Sorted(maps.Keys(res.Pools)) {
		pool := res.Pools[name]
		for i, sl := range pool.Slices {
			items = append(items, resourceapi.ResourceSlice{
				TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, "cpupool.dev", i)},
				Spec: resourceapi.ResourceSliceSpec{Driver: dra.DriverName, NodeName: &node, Devices: sl.Devices,
					Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}},
			})
		}
	}
	if nics > 0 {
		items = append(items, nicSlice(topo, node, nics))
	}
	return items, nil
}

// nicSlice is a second driver's slice: nics devices on every NUMA node
// that has CPUs, named nic<node>-<i>, with resource.kubernetes.io/numaNode.
func nicSlice(topo *sysfs.Topology, node string, nics int) resourceapi.ResourceSlice {
	seen := map[int]bool{}
	for _, c := range topo.CPUs {
		if c.Online && c.NUMA != sysfs.Unknown {
			seen[c.NUMA] = true
		}
	}
	var devices []resourceapi.Device
	for _, numa := range slices.Sorted(maps.Keys(seen)) {
		for i := range nics {
			devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("nic%d-%d", numa, i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{dra.AttrNUMANode: {IntValue: ptr.To(int64(numa))}}})
		}
	}
	return resourceapi.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: NICDriver, NodeName: &node, Devices: devices,
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
}

// kwokNode is a Node that kwok manages (it keeps it Ready and runs its
// pods), with room for every pod the run makes.
func kwokNode(name string, topo *sysfs.Topology) corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(topo.Online.Size()), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	return corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
}
