package dra

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

const testNode = "node-a"

var (
	topoMu    sync.Mutex
	topoCache = map[string]*sysfs.Topology{}
)

// topology discovers a named fixture (testdata/topologies) once per test
// binary.
func topology(tb testing.TB, name string) *sysfs.Topology {
	tb.Helper()
	topoMu.Lock()
	defer topoMu.Unlock()
	if t, ok := topoCache[name]; ok {
		return t
	}
	t, err := sysfs.Discover(fixture.Root(tb, name))
	require.NoError(tb, err)
	topoCache[name] = t
	return t
}

// topologyWithOffline discovers a named fixture with CPUs taken offline
// (a list, "7,15").
func topologyWithOffline(tb testing.TB, name, offline string) *sysfs.Topology {
	tb.Helper()
	dir, err := fixture.SpecDir()
	require.NoError(tb, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, name+".yaml"))
	require.NoError(tb, err)
	spec.Offline = offline
	// tmpfs, as fixture.Root: thousands of small files.
	root, err := os.MkdirTemp("/dev/shm", "nri-cpupool-fixture-")
	if err != nil {
		root = tb.TempDir()
	} else {
		tb.Cleanup(func() { os.RemoveAll(root) })
	}
	require.NoError(tb, spec.Write(root))
	t, err := sysfs.Discover(root)
	require.NoError(tb, err)
	return t
}

func parseConfig(tb testing.TB, yaml string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse(strings.NewReader(yaml), "test.yaml")
	require.NoError(tb, err)
	return cfg
}

func static(tb testing.TB, fixtureName, yaml string) *Static {
	tb.Helper()
	s, err := NewStatic(topology(tb, fixtureName), parseConfig(tb, yaml))
	require.NoError(tb, err)
	return s
}

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// testDriver is a driver on a fixture with its files in a temporary
// directory.
type testDriver struct {
	*Driver
	pools  Pools
	claims string
	cdi    string
	// model is the driver's device model; empty is the default.
	model string
}

func newTestDriver(tb testing.TB, p Pools) *testDriver {
	tb.Helper()
	dir := tb.TempDir()
	td := &testDriver{pools: p, claims: filepath.Join(dir, "state", "dra-claims.json"), cdi: filepath.Join(dir, "cdi")}
	td.Driver = td.restart(tb)
	return td
}

// restart is a new driver process over the same files.
func (td *testDriver) restart(tb testing.TB) *Driver {
	tb.Helper()
	d, err := New(td.pools, Options{NodeName: testNode, Model: td.model, ClaimsFile: td.claims, CDIDir: td.cdi, Log: quietLog()})
	require.NoError(tb, err)
	return d
}

// slots is an allocation: request name -> slot names.
type slots map[string][]string

// allocatedClaim builds a claim as the scheduler leaves it: allocated from
// this node's pool and reserved for pods.
func allocatedClaim(uid, name string, alloc slots, pods ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, req := range slices.Sorted(maps.Keys(alloc)) {
		for _, dev := range alloc[req] {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: req, Driver: DriverName, Pool: testNode, Device: dev})
		}
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "pod-" + p, UID: types.UID(p)})
	}
	return c
}

// shareClaim builds a claim as the scheduler leaves it in the numaNode
// model: one request given a share of cpus CPUs of a pool's device on a
// NUMA node, reserved for pods.
func shareClaim(uid, name, pool string, numa, cpus int, pods ...string) *resourceapi.ResourceClaim {
	c := allocatedClaim(uid, name, slots{"cpus": {GroupName(pool, numa)}}, pods...)
	res := &c.Status.Allocation.Devices.Results[0]
	res.ShareID = ptr.To(types.UID("share-" + uid))
	res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{CapacityCPUs: *resource.NewQuantity(int64(cpus), resource.DecimalSI)}
	return c
}

// slotsOn names n slots of a pool on a NUMA node, from first.
func slotsOn(pool string, numa, first, n int) []string {
	var out []string
	for i := range n {
		out = append(out, SlotName(pool, numa, first+i))
	}
	return out
}

func set(tb testing.TB, s string) cpuset.CPUSet {
	tb.Helper()
	c, err := cpuset.Parse(s)
	require.NoError(tb, err)
	return c
}

// numaOf returns the NUMA nodes of cpus on topo.
func numaOf(topo *sysfs.Topology, cpus cpuset.CPUSet) string {
	return fmt.Sprint(topo.NUMANodesOf(cpus).List())
}

// mustNode returns the CPUs of NUMA node n.
func mustNode(tb testing.TB, topo *sysfs.Topology, n int) cpuset.CPUSet {
	tb.Helper()
	node, ok := topo.NUMANode(n)
	require.True(tb, ok, "NUMA node %d", n)
	return node.CPUs
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// changingPools are Static pools where a test decides what containers
// hold.
type changingPools struct {
	*Static
	mu       sync.Mutex
	held     cpuset.CPUSet
	changed  chan struct{}
	released []string
}

func (p *changingPools) Held(string) cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *changingPools) Changed() <-chan struct{} { return p.changed }

func (p *changingPools) Release(pods []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = append(p.released, pods...)
}

func (p *changingPools) hold(cpus cpuset.CPUSet) {
	p.mu.Lock()
	p.held = cpus
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}
