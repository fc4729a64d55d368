// Command draslices prints, as ResourceSlice objects for kubectl, what the
// cpupool.dev DRA driver publishes for a node: the same code (dra.Offer,
// dra.WithMemory and dra.Resources) over a sysfs tree and a config, for a Node that has no
// kubelet of its own. The Kubernetes suite uses it to give the scheduler a
// multi-NUMA node on a machine with one NUMA node:
//
//	go run ./tools/draslices -sysfs-root DIR -config F -node NAME [-devices numaNode|cpu] | kubectl apply -f -
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/sysfs"
)

func main() {
	root := flag.String("sysfs-root", "/", "directory holding sys/ and proc/")
	cfgPath := flag.String("config", "", "nri-cpupool config (empty: defaults)")
	node := flag.String("node", "", "the Node's name")
	devices := flag.String("devices", config.DRADevicesNUMANode, "device model: numaNode or cpu")
	flag.Parse()
	if err := run(*root, *cfgPath, *node, *devices); err != nil {
		fmt.Fprintln(os.Stderr, "draslices:", err)
		os.Exit(1)
	}
}

func run(root, cfgPath, node, devices string) error {
	if node == "" {
		return fmt.Errorf("-node is required")
	}
	cfg := config.Default()
	if cfgPath != "" {
		var err error
		if cfg, err = config.Load(cfgPath); err != nil {
			return err
		}
	}
	topo, err := sysfs.Discover(root)
	if err != nil {
		return err
	}
	pools, err := dra.NewStatic(topo, cfg)
	if err != nil {
		return err
	}
	t, layout := pools.Layout()
	res := dra.Resources(node, devices, dra.WithMemory(dra.Offer(t, layout, nil), pools.MemoryOffer()))
	list := struct {
		APIVersion string                      `json:"apiVersion"`
		Kind       string                      `json:"kind"`
		Items      []resourceapi.ResourceSlice `json:"items"`
	}{APIVersion: "v1", Kind: "List"}
	for _, name := range slices.Sorted(maps.Keys(res.Pools)) {
		pool := res.Pools[name]
		for i, sl := range pool.Slices {
			list.Items = append(list.Items, resourceapi.ResourceSlice{
				TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, "cpupool.dev", i)},
				Spec: resourceapi.ResourceSliceSpec{Driver: dra.DriverName, NodeName: &node, Devices: sl.Devices,
					Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}},
			})
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(list)
}
