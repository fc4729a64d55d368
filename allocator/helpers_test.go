package allocator

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

var (
	topoMu    sync.Mutex
	topoCache = map[string]*sysfs.Topology{}
)

// topology discovers a named fixture once per test binary.
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

func parseConfig(tb testing.TB, yaml string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse(strings.NewReader(yaml), "test.yaml")
	require.NoError(tb, err)
	return cfg
}

// newAllocator builds an allocator for a fixture and a config, failing the
// test on any layout error.
func newAllocator(tb testing.TB, fixtureName, yaml string) *Allocator {
	tb.Helper()
	topo := topology(tb, fixtureName)
	cfg := parseConfig(tb, yaml)
	layout, problems := BuildLayout(topo, cfg)
	require.False(tb, problems.HasErrors(), "layout problems: %v", problems)
	return New(topo, layout, cfg.PinMemory)
}

func exclusive(id string, cpus int) Request {
	return Request{ID: id, Pod: PodRef{Namespace: "ns", Name: "pod-" + id, UID: "uid-" + id}, Container: "c", Pool: pools.Exclusive,
		MilliCPU: int64(cpus) * 1000, NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()}
}

func set(tb testing.TB, s string) cpuset.CPUSet {
	tb.Helper()
	c, err := cpuset.Parse(s)
	require.NoError(tb, err)
	return c
}

// shape measures a placement the way the rules judge it.
type shape struct {
	numaNodes, sockets, cores, l3Groups, splitCores int
}

func measure(topo *sysfs.Topology, cpus cpuset.CPUSet) shape {
	numa, sockets, cores, l3 := map[int]bool{}, map[int]bool{}, map[int]int{}, map[int]bool{}
	var s shape
	for _, id := range cpus.List() {
		c, _ := topo.CPU(id)
		numa[c.NUMA], sockets[c.Socket], l3[c.L3] = true, true, true
		cores[c.Core]++
	}
	for _, id := range cpus.List() {
		c, _ := topo.CPU(id)
		if cores[c.Core] > 0 && cores[c.Core] < c.Siblings.Size() {
			s.splitCores++
			cores[c.Core] = 0
		}
	}
	s.numaNodes, s.sockets, s.cores, s.l3Groups = len(numa), len(sockets), len(cores), len(l3)
	return s
}

// wholeFreeCores counts cores of the pool whose threads are all free.
func wholeFreeCores(a *Allocator, pool string) int {
	free := a.FreeCPUs(pool)
	n := 0
	for _, threads := range a.x.cores {
		whole := len(threads) > 0
		for _, t := range threads {
			whole = whole && free.Contains(t)
		}
		if whole {
			n++
		}
	}
	return n
}
