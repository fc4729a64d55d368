package allocator

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// discoverOffline is a fixture with CPUs offline as Discover reads it from
// the kernel's files: no topology, caches or siblings for them.
func discoverOffline(t *testing.T, name string, offline cpuset.CPUSet) *sysfs.Topology {
	t.Helper()
	dir, err := fixture.SpecDir()
	require.NoError(t, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, name+".yaml"))
	require.NoError(t, err)
	spec.Offline = offline.String()
	root := shmDir(t)
	require.NoError(t, spec.Write(root))
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	return topo
}

// shmDir is a directory on tmpfs when there is one: a fixture is
// thousands of small files, slow to create on a VM's disk.
func shmDir(t *testing.T) string {
	if dir, err := os.MkdirTemp("/dev/shm", "nri-cpupool-present-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return t.TempDir()
}

// TestPresentTopologyPlacesOfflineCPUs: an offline CPU is put back in its
// core, beside its online sibling or with its offline siblings as a whole
// core, with its socket and NUMA node, and the cores are numbered as
// Discover numbers them when every CPU is online; on a node whose cores
// show no one numbering of their threads, it is a core of its own.
func TestPresentTopologyPlacesOfflineCPUs(t *testing.T) {
	for _, tc := range []struct{ fixture, offline string }{
		{"desktop-8c16t", "10"},
		{"desktop-8c16t", "7,15"},
		{"desktop-8c16t", "3,10,13,15"},
		{"xeon-2s-interleaved", "5,13,45,53,70-71,30-31"},
		{"epyc-1s-nps4", "17,80-81,100-127"},
	} {
		t.Run(tc.fixture+"/"+tc.offline, func(t *testing.T) {
			full := topology(t, tc.fixture)
			off := set(t, tc.offline)
			topo := discoverOffline(t, tc.fixture, off)
			whole := presentTopology(topo)
			assert.True(t, whole.Online.Equals(topo.Present))
			assert.True(t, topo.Online.Equals(full.Online.Difference(off)), "the input is not changed")
			for i, c := range whole.CPUs {
				want := full.CPUs[i]
				assert.True(t, c.Online)
				assert.Equal(t, want.Core, c.Core, "core of CPU %d", c.ID)
				assert.Equal(t, want.NUMA, c.NUMA, "NUMA node of CPU %d", c.ID)
				assert.Equal(t, want.Socket, c.Socket, "socket of CPU %d", c.ID)
			}
		})
	}

	// The kubelet's Knights Landing shape numbers its 4 threads irregularly.
	topo := discoverOffline(t, "kubelet-quad-socket-four-way-ht", cpuset.New(5))
	whole := presentTopology(topo)
	c, _ := whole.CPU(5)
	assert.GreaterOrEqual(t, c.Core, 0)
	for _, o := range whole.CPUs {
		if o.ID != 5 {
			assert.NotEqual(t, c.Core, o.Core, "CPU 5 is a core of its own")
		}
	}
}

// TestLayoutWithOfflineCPUsIsTheFullLess (issue 41, item 1): the pools laid
// out while CPUs are offline are those laid out with every CPU online,
// less the offline CPUs, at a start (BuildLayout) as at a reload
// (BuildLayoutRunning): a CPU being offline moves no other CPU's pool, and
// a count that fits the present CPUs is never an error.
func TestLayoutWithOfflineCPUsIsTheFullLess(t *testing.T) {
	for _, tc := range []struct{ fixture, config string }{
		{"desktop-8c16t", `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {shared: {count: 2}, exclusive-non-isolcpus: {enabled: true}}}`},
		{"desktop-8c16t", `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {count: 12}}}`},
		{"desktop-8c16t", `{isolatedCPUs: "1-7,9-15", reservedCPUs: "0,8", pools: {exclusive: {count: 7}, shared: {count: 3}}}`},
		{"xeon-2s-interleaved", `{reservedCPUs: "0-1,40-41", pools: {exclusive: {count: 50}, shared: {count: 6}}}`},
		{"epyc-1s-nps4", `{isolatedCPUs: "4-63,68-127", reservedCPUs: "0,64", pools: {exclusive: {count: 61}, shared: {count: 17}}}`},
	} {
		full := topology(t, tc.fixture)
		cfg := parseConfig(t, tc.config)
		want, problems := BuildLayout(full, cfg)
		require.False(t, problems.HasErrors(), "%s %s: %v", tc.fixture, tc.config, problems)
		rng := rand.New(rand.NewPCG(41, uint64(full.Present.Size())))
		for round := range 4 {
			var off []int
			for _, id := range full.Present.List() {
				if id != 0 && rng.IntN(8) == 0 {
					off = append(off, id)
				}
			}
			offline := cpuset.New(off...)
			t.Run(fmt.Sprintf("%s/%d/offline=%s", tc.fixture, round, offline), func(t *testing.T) {
				topo := discoverOffline(t, tc.fixture, offline)
				for name, build := range map[string]func() (*Layout, bool){
					"start":  func() (*Layout, bool) { l, p := BuildLayout(topo, cfg); return l, p.HasErrors() },
					"reload": func() (*Layout, bool) { l, p := BuildLayoutRunning(topo, cfg); return l, p.HasErrors() },
				} {
					got, errs := build()
					if name == "reload" {
						require.False(t, errs, "%s: a count that fits the present CPUs", name)
					}
					online := topo.Online
					assert.Equal(t, want.Exclusive.Intersection(online).String(), got.Exclusive.String(), "%s: exclusive", name)
					assert.Equal(t, want.Shared.Intersection(online).String(), got.Shared.String(), "%s: shared", name)
					assert.Equal(t, want.Infra.Intersection(online).String(), got.Infra.String(), "%s: infra", name)
					assert.Equal(t, want.Reserved.Intersection(online).String(), got.Reserved.String(), "%s: reserved", name)
					assert.Equal(t, want.Isolated.Intersection(online).String(), got.Isolated.String(), "%s: isolated", name)
					assert.Equal(t, want.ExclusiveNonIsolcpus.Intersection(online).String(), got.ExclusiveNonIsolcpus.String(), "%s: lendable", name)
				}
			})
		}
	}
}

// TestCountFitsPresentCPUs (issue 41, item 1): a count that fits the
// present CPUs is no error at a start because one of them is offline; one
// that does not fit them still is.
func TestCountFitsPresentCPUs(t *testing.T) {
	topo := discoverOffline(t, "desktop-8c16t", cpuset.New(5))
	// The daemon lays out with BuildLayoutRunning at a start too (an
	// offline CPU a list names is a warning there).
	l, problems := BuildLayoutRunning(topo, parseConfig(t, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {count: 12}}}`))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-4,6-7,10-15", l.Exclusive.String())
	assert.Equal(t, "0-1,8-9", l.Infra.String())

	_, problems = BuildLayoutRunning(topo, parseConfig(t, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {count: 13}}}`))
	require.True(t, problems.HasErrors())
	assert.Contains(t, problems.Errors()[0].String(), "asks for 13 CPUs but only 12 are left to carve")
}

// TestCountWithNothingIsolated: a count where nothing is isolated says so
// and how to isolate CPUs, not `(the kernel's isolated CPUs (isolcpus=)
// "", ...)` (review 58, item 10).
func TestCountWithNothingIsolated(t *testing.T) {
	topo := discoverOffline(t, "desktop-8c16t", cpuset.New()) // the kernel isolates no CPU
	_, problems := BuildLayoutRunning(topo, parseConfig(t, `{pools: {exclusive: {count: 4}}}`))
	require.True(t, problems.HasErrors())
	assert.Equal(t, "error: pools.exclusive.count: asks for 4 CPUs but the kernel isolates no CPU (no isolcpus= or nohz_full= on the kernel command line), and a count is carved from the isolated CPUs; "+
		"boot with isolcpus= and nohz_full= naming the CPUs to isolate, or name them in isolatedCPUs or in the pool's cpus, or remove the count", problems.Errors()[0].String())

	_, problems = BuildLayoutRunning(topo, parseConfig(t, `{isolatedCPUs: "", pools: {shared: {count: 2}}}`))
	require.True(t, problems.HasErrors())
	assert.Equal(t, "error: pools.shared.count: asks for 2 CPUs but isolatedCPUs is empty, and a count is carved from the isolated CPUs; name CPUs in isolatedCPUs or in the pool's cpus, or remove the count",
		problems.Errors()[0].String())
}

// TestSMTOffCarvesOnline: with SMT disabled (nosmt) the second threads are
// present but can never come online, so counts are carved on the online
// CPUs alone and every CPU of a count pool is online: carving the siblings
// too would leave the pool short of its count on a node that never
// changes.
func TestSMTOffCarvesOnline(t *testing.T) {
	topo := topology(t, "xeon-1s-nosmt")
	require.True(t, topo.SMTDisabled(), "the fixture's smt/control is off")
	require.Equal(t, "16-31", topo.Offline.String())
	// isolcpus= as an administrator writes it for the machine with SMT
	// on: the offline siblings are named too (a warning while they are
	// offline).
	l, problems := BuildLayoutRunning(topo, parseConfig(t, `{isolatedCPUs: "2-15,18-31", pools: {shared: {count: 2}, exclusive: {count: 12}}}`))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, 2, l.Shared.Size(), "shared %s", l.Shared)
	assert.Equal(t, 12, l.Exclusive.Size(), "exclusive %s", l.Exclusive)
	assert.True(t, l.Shared.Union(l.Exclusive).IsSubsetOf(topo.Online))

	_, problems = BuildLayoutRunning(topo, parseConfig(t, `{isolatedCPUs: "2-15,18-31", pools: {shared: {count: 2}, exclusive: {count: 13}}}`))
	require.True(t, problems.HasErrors(), "a count more than the online CPUs is an error where the rest can never come online")
}
