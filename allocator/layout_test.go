package allocator

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

func TestBuildLayout(t *testing.T) {
	tests := []struct {
		name, fixture, config                   string
		exclusive, shared, infra, eni, reserved string
		check                                   func(t *testing.T, l *Layout)
	}{
		{name: "kernel isolcpus all exclusive by default", fixture: "xeon-2s-interleaved", config: "",
			exclusive: "2-39,42-79", shared: "", infra: "0-1,40-41", eni: ""},
		{name: "counts carve whole cores spread over NUMA nodes", fixture: "xeon-2s-interleaved",
			config: "pools: {exclusive: {count: 16}, shared: {count: 4}}",
			check: func(t *testing.T, l *Layout) {
				topo := topology(t, "xeon-2s-interleaved")
				assert.Equal(t, 16, l.Exclusive.Size())
				assert.Equal(t, 4, l.Shared.Size())
				assert.Equal(t, 0, measure(topo, l.Exclusive).splitCores, "exclusive %s splits no core", l.Exclusive)
				assert.Equal(t, 0, measure(topo, l.Shared).splitCores, "shared %s splits no core", l.Shared)
				assert.Equal(t, 8, l.Exclusive.Intersection(topo.NUMANodes[0].CPUs).Size(), "NUMA node 0 gets half")
				assert.True(t, l.Exclusive.IsSubsetOf(topo.Isolated))
				assert.True(t, l.Infra.Contains(0) && l.Infra.Contains(41))
			}},
		{name: "exclusive unsized takes what shared leaves", fixture: "desktop-8c16t",
			config:    "isolatedCPUs: \"2-7,10-15\"\npools: {shared: {cpus: \"2,10\"}}",
			exclusive: "3-7,11-15", shared: "2,10", infra: "0-1,8-9", eni: ""},
		{name: "explicit lists and reserved", fixture: "desktop-8c16t",
			config:    "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {cpus: \"4-7,12-15\"}, shared: {cpus: \"2-3,10-11\"}, exclusive-non-isolcpus: {enabled: true}}",
			exclusive: "4-7,12-15", shared: "2-3,10-11", infra: "0-1,8-9", eni: "1,9", reserved: "0,8"},
		{name: "isolated CPUs left to infra are never lent", fixture: "desktop-8c16t",
			config:    "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}",
			exclusive: "2-5,10-13", shared: "", infra: "0-1,6-9,14-15", eni: "0-1,8-9", reserved: ""},
		{name: "SST-BF priority cores first", fixture: "xeon-2s-snc2",
			config: "isolatedCPUs: \"2-39,42-79\"\npools: {exclusive: {count: 8}}",
			check: func(t *testing.T, l *Layout) {
				topo := topology(t, "xeon-2s-snc2")
				for _, id := range l.Exclusive.List() {
					c, _ := topo.CPU(id)
					assert.Equal(t, int64(2700000), c.BaseFreqKHz, "CPU %d of %s is a priority core", id, l.Exclusive)
				}
				assert.Equal(t, 4, topo.NUMANodesOf(l.Exclusive).Size(), "one core per NUMA node")
			}},
		{name: "odd count splits one core at most", fixture: "epyc-1s-nps4",
			config: "isolatedCPUs: \"8-63,72-127\"\npools: {exclusive: {count: 13}}",
			check: func(t *testing.T, l *Layout) {
				assert.Equal(t, 13, l.Exclusive.Size())
				assert.LessOrEqual(t, measure(topology(t, "epyc-1s-nps4"), l.Exclusive).splitCores, 4, "at most one split core per NUMA node share")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, problems := BuildLayout(topology(t, tc.fixture), parseConfig(t, tc.config))
			require.False(t, problems.HasErrors(), "%v", problems)
			if tc.check != nil {
				tc.check(t, l)
				return
			}
			assert.Equal(t, tc.exclusive, l.Exclusive.String(), "exclusive")
			assert.Equal(t, tc.shared, l.Shared.String(), "shared")
			assert.Equal(t, tc.infra, l.Infra.String(), "infra")
			assert.Equal(t, tc.eni, l.ExclusiveNonIsolcpus.String(), "exclusive-non-isolcpus")
			assert.Equal(t, tc.reserved, l.Reserved.String(), "reserved")
			// Deterministic.
			again, _ := BuildLayout(topology(t, tc.fixture), parseConfig(t, tc.config))
			assert.Equal(t, l, again)
		})
	}
}

func TestBuildLayoutProblems(t *testing.T) {
	tests := []struct {
		name, fixture, config string
		key, contains         string
		warning               bool
	}{
		{"CPU does not exist", "desktop-8c16t", "isolatedCPUs: \"2-20\"", "isolatedCPUs", "CPUs 16-20 do not exist", false},
		{"a CPU that does not exist", "desktop-8c16t", "isolatedCPUs: \"2-16\"", "isolatedCPUs", "CPU 16 does not exist on this node", false},
		{"CPU offline", "server-offline-isolcpus", "pools: {exclusive: {cpus: \"2-7\"}}", "pools.exclusive.cpus", "CPU 7 is offline (online: 0-6,8-14,16-30); bring it online", false},
		{"pools overlap", "desktop-8c16t", "isolatedCPUs: \"2-7\"\npools: {exclusive: {cpus: \"2-5\"}, shared: {cpus: \"5-7\"}}", "pools.exclusive.cpus", "overlaps pools.shared.cpus on CPU 5", false},
		{"pool overlaps reserved", "desktop-8c16t", "reservedCPUs: \"2\"\npools: {shared: {cpus: \"2-3\"}}", "pools.shared.cpus", "overlaps reservedCPUs on CPU 2", false},
		{"count too large", "xeon-2s-interleaved", "pools: {exclusive: {count: 70}, shared: {count: 10}}", "pools.shared.count", "asks for 10 CPUs but only 6 are left", false},
		{"count without isolated CPUs", "desktop-8c16t", "pools: {exclusive: {count: 2}}", "pools.exclusive.count", "but the kernel isolates no CPU", false},
		{"infra empty", "vm-2cpu", "pools: {exclusive: {cpus: \"0-1\"}}", "pools", "no CPU is left for infra", false},
		{"splits siblings", "desktop-8c16t", "isolatedCPUs: \"2-7\"", "pools.exclusive", "splits the hyperthreads", true},
		{"not isolated", "desktop-8c16t", "pools: {exclusive: {cpus: \"2,10\"}}", "pools.exclusive.cpus", "not isolated", true},
		{"leftover isolated", "xeon-2s-interleaved", "pools: {exclusive: {count: 4}}", "pools", "in neither exclusive nor shared", true},
		{"offline CPU in isolatedCPUs", "server-offline-isolcpus", "isolatedCPUs: \"2-7\"", "isolatedCPUs", "CPU 7 is offline (online: 0-6,8-14,16-30); bring it online", false},
		{"kernel isolates an offline CPU", "server-offline-isolcpus", "", "isolatedCPUs", "the kernel isolates offline CPU 7; it joins its pool when it comes online", true},
		{"exclusive overlaps reserved", "desktop-8c16t", "reservedCPUs: \"2\"\npools: {exclusive: {cpus: \"2-3\"}}", "pools.exclusive.cpus", "overlaps reservedCPUs on CPU 2", false},
		{"exclusive default pool", "desktop-8c16t", "defaultPool: exclusive", "defaultPool", "makes every container without a CPU request fail", true},
		{"nothing isolated", "desktop-8c16t", "", "pools.exclusive", "is empty: the kernel isolates no CPU (no isolcpus= or nohz_full= on the kernel command line), so every container that asks for the exclusive pool is refused; boot with isolcpus=managed_irq,1-7,9-15 nohz_full=1-7,9-15, or name CPUs in isolatedCPUs or pools.exclusive.cpus, or enable pools.exclusive-non-isolcpus", true},
		{"nothing isolated, reserved CPUs out of the example", "desktop-8c16t", "reservedCPUs: \"1,9\"", "pools.exclusive", "isolcpus=managed_irq,2-7,10-15 ", true},
		{"nothing isolated, exclusive-non-isolcpus on", "desktop-8c16t", "pools: {exclusive-non-isolcpus: {enabled: true}}", "pools.exclusive", "or have containers ask for pools.exclusive-non-isolcpus (enabled) instead", true},
		{"eni with nothing to lend", "vm-2cpu", "isolatedCPUs: \"1\"\npools: {exclusive-non-isolcpus: {enabled: true}}", "pools.exclusive-non-isolcpus", "no CPU to lend", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := BuildLayout(topology(t, tc.fixture), parseConfig(t, tc.config))
			found := false
			for _, p := range problems {
				if p.Key == tc.key && p.Warning == tc.warning && strings.Contains(p.Message, tc.contains) {
					found = true
				}
			}
			assert.True(t, found, "want a %v at %s containing %q, got %v", map[bool]string{true: "warning", false: "error"}[tc.warning], tc.key, tc.contains, problems)
		})
	}
}

// TestEmptyExclusiveWarnsOnlyWhenNothingIsIsolated: the warning is for a
// node booted without isolcpus=, not for an exclusive pool the config
// empties or fills itself.
func TestEmptyExclusiveWarnsOnlyWhenNothingIsIsolated(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, config string
		warn                  bool
	}{
		{"no isolcpus, no config", "desktop-8c16t", "", true},
		{"no isolcpus, shared listed", "desktop-8c16t", "pools: {shared: {cpus: \"2-3\"}}", true},
		{"isolcpus", "xeon-2s-interleaved", "", false},
		{"isolatedCPUs names CPUs", "desktop-8c16t", "isolatedCPUs: \"2-7\"", false},
		{"isolatedCPUs empty on purpose", "desktop-8c16t", "isolatedCPUs: \"\"", false},
		{"exclusive listed", "desktop-8c16t", "pools: {exclusive: {cpus: \"2-3\"}}", false},
		{"shared takes every isolated CPU", "xeon-2s-interleaved", "pools: {shared: {count: 76}}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := BuildLayout(topology(t, tc.fixture), parseConfig(t, tc.config))
			require.False(t, problems.HasErrors(), "%v", problems)
			found := false
			for _, w := range problems.Warnings() {
				found = found || w.Key == "pools.exclusive" && strings.Contains(w.Message, "the kernel isolates no CPU")
			}
			assert.Equal(t, tc.warn, found, "%v", problems)
		})
	}
}

// TestBuildLayoutUncheckedConfig: a config that skipped Check (built in
// code) still gets a clear error rather than a panic.
func TestBuildLayoutUncheckedConfig(t *testing.T) {
	cfg := config.Default()
	cfg.ReservedCPUs = "0-"
	_, problems := BuildLayout(topology(t, "desktop-8c16t"), cfg)
	require.True(t, problems.HasErrors())
	assert.Equal(t, "reservedCPUs", problems.Errors()[0].Key)
	assert.Contains(t, problems.Errors()[0].Message, `malformed CPU list "0-"`)
}

// TestSharedPoolOnDomainIsolatedCPUsWarns: isolcpus= without flags or with
// domain keeps the scheduler from balancing a shared pool's threads.
func TestSharedPoolOnDomainIsolatedCPUsWarns(t *testing.T) {
	const warning = "taken out of the scheduler's load balancing"
	flagless := func() *sysfs.Topology {
		spec, err := fixture.LoadSpec(filepath.Join(specDir(t), "desktop-8c16t.yaml"))
		require.NoError(t, err)
		spec.Cmdline = "isolcpus=2-7,10-15"
		root := t.TempDir()
		require.NoError(t, spec.Write(root))
		topo, err := sysfs.Discover(root)
		require.NoError(t, err)
		return topo
	}()
	tests := []struct {
		name   string
		topo   *sysfs.Topology
		config string
		warn   string // the domain-isolated shared CPUs named, "" for no warning
	}{
		{"isolcpus=domain,managed_irq: a shared pool of 8", topology(t, "xeon-2s-interleaved"), "pools: {shared: {count: 8}}", "CPUs 2-5,42-45 are"},
		{"isolcpus without flags: a shared pool of 4", flagless, "pools: {shared: {cpus: \"2-3,10-11\"}}", "CPUs 2-3,10-11 are"},
		{"a shared pool of one CPU balances nothing", topology(t, "xeon-2s-interleaved"), "pools: {shared: {cpus: \"2\"}}", ""},
		{"isolcpus=managed_irq only: balanced", topology(t, "server-offline-isolcpus"), "pools: {shared: {count: 4}}", ""},
		{"no shared pool", topology(t, "xeon-2s-interleaved"), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := BuildLayout(tc.topo, parseConfig(t, tc.config))
			var found []string
			for _, w := range problems.Warnings() {
				if strings.Contains(w.String(), warning) {
					found = append(found, w.String())
				}
			}
			if tc.warn == "" {
				assert.Empty(t, found)
				return
			}
			require.Len(t, found, 1)
			assert.Contains(t, found[0], "pools.shared")
			assert.Contains(t, found[0], tc.warn)
			assert.Contains(t, found[0], "isolcpus=managed_irq,")
			assert.Contains(t, found[0], "cpuset partition")
		})
	}
}

func specDir(t *testing.T) string {
	d, err := fixture.SpecDir()
	require.NoError(t, err)
	return d
}

// TestDefaultPoolWithoutCPUs: a defaultPool with no CPUs on the node
// would refuse every container without a pool annotation (kube-system's
// too), so the check run, validate and a reload share refuses it; a pool
// empty only while its CPUs are offline is a warning, as offline CPUs are
// for a running daemon.
func TestDefaultPoolWithoutCPUs(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, config string
		// want is "" (no defaultPool finding), "error" or "warning".
		want, contains string
		running        bool
	}{
		{"shared left empty (install.md's example)", "desktop-8c16t", "isolatedCPUs: 2-15\npools: {exclusive: {cpus: 2-11}}\ndefaultPool: shared", "error", `"shared" has no CPUs on this node`, false},
		{"shared with CPUs", "desktop-8c16t", "isolatedCPUs: 2-15\npools: {exclusive: {cpus: 2-11}, shared: {cpus: 12-15}}\ndefaultPool: shared", "", "", false},
		{"exclusive without isolated CPUs", "desktop-8c16t", "defaultPool: exclusive", "error", `"exclusive" has no CPUs on this node`, false},
		{"exclusive with CPUs", "xeon-2s-interleaved", "defaultPool: exclusive", "", "", false},
		{"exclusive-non-isolcpus not enabled", "desktop-8c16t", "defaultPool: exclusive-non-isolcpus", "error", "is not enabled", false},
		{"exclusive-non-isolcpus with nothing to lend", "vm-2cpu", "isolatedCPUs: \"1\"\npools: {exclusive-non-isolcpus: {enabled: true}}\ndefaultPool: exclusive-non-isolcpus", "error", "has no CPU to lend", false},
		{"exclusive-non-isolcpus enabled", "desktop-8c16t", "pools: {exclusive-non-isolcpus: {enabled: true}}\ndefaultPool: exclusive-non-isolcpus", "", "", false},
		{"infra", "desktop-8c16t", "isolatedCPUs: 2-15\npools: {exclusive: {cpus: 2-11}}", "", "", false},
		{"exclusive-non-isolcpus with nothing to lend while CPUs are offline", "server-offline-isolcpus", "pools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 18}}\ndefaultPool: exclusive-non-isolcpus", "warning", "has no CPU to lend while CPUs", true},
		{"exclusive-non-isolcpus with SMT off for good", "xeon-1s-nosmt", "pools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 16}}\ndefaultPool: exclusive-non-isolcpus", "error", "has no CPU to lend on this node", true},
		{"shared's CPUs offline", "server-offline-isolcpus", "pools: {exclusive: {cpus: 2-6}, shared: {cpus: \"7\"}}\ndefaultPool: shared", "warning", "its CPU 7 is offline", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := BuildLayout
			if tc.running {
				build = BuildLayoutRunning
			}
			_, problems := build(topology(t, tc.fixture), parseConfig(t, tc.config))
			got := ""
			for _, p := range problems {
				if p.Key != "defaultPool" || p.Warning && strings.Contains(p.Message, "makes every container without a CPU request fail") {
					continue
				}
				got = map[bool]string{true: "warning", false: "error"}[p.Warning]
				assert.Contains(t, p.Message, tc.contains)
			}
			assert.Equal(t, tc.want, got, "%v", problems)
		})
	}
}

// TestOversizedMemoryReserveWarns: memory.reservedPerNode is kept on each
// NUMA node; at least a node's memory (less its hugepage pools) leaves no
// room there for a container whose memory is pinned.
func TestOversizedMemoryReserveWarns(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, reserve, want string
	}{
		{"a machine's reserve written per node", "desktop-8c16t", "200Gi", "200Gi is at least the memory of NUMA node 0 (64Gi), less its hugepage pools"},
		{"below the node", "desktop-8c16t", "63Gi", ""},
		{"the hugepage pools count", "vm-2numa-hugepages", "4032Mi", "4032Mi is at least the memory of NUMA node 1 (4032Mi)"},
		{"every node", "vm-2numa-hugepages", "4Gi", "NUMA nodes 0 (4Gi), 1 (4032Mi)"},
		{"just below", "vm-2numa-hugepages", "4031Mi", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := BuildLayout(topology(t, tc.fixture), parseConfig(t, "memory: {reservedPerNode: "+tc.reserve+"}"))
			require.False(t, problems.HasErrors(), "%v", problems)
			got := ""
			for _, w := range problems.Warnings() {
				if w.Key == "memory.reservedPerNode" {
					got = w.Message
				}
			}
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
			assert.Contains(t, got, "placed by its CPUs alone with a warning that it may be OOM-killed")
		})
	}
}

// TestCountZeroIsNotSet: pools.<pool>.count: 0 is the default and means
// "not set", a contract documented in docs/configuration.md,
// packaging/config.yaml and the chart's values.yaml: an exclusive pool
// with count 0 takes every isolated CPU shared leaves, as with the key
// left out; an empty exclusive pool is had by leaving it no isolated CPU,
// in each of the ways those documents name.
func TestCountZeroIsNotSet(t *testing.T) {
	const fixture = "xeon-2s-interleaved"
	unset, problems := BuildLayout(topology(t, fixture), parseConfig(t, ""))
	require.False(t, problems.HasErrors(), "%v", problems)
	zero, problems := BuildLayout(topology(t, fixture), parseConfig(t, "pools: {exclusive: {count: 0}, shared: {count: 0}}"))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, unset, zero)
	assert.Equal(t, topology(t, fixture).Isolated.String(), zero.Exclusive.String(), "every isolated CPU")
	assert.True(t, zero.Shared.IsEmpty())

	for _, cfg := range []string{"isolatedCPUs: \"\"", "pools: {shared: {cpus: \"2-39,42-79\"}}", "reservedCPUs: \"2-39,42-79\""} {
		l, problems := BuildLayout(topology(t, fixture), parseConfig(t, cfg))
		require.False(t, problems.HasErrors(), "%s: %v", cfg, problems)
		assert.True(t, l.Exclusive.IsEmpty(), "%s: exclusive %s", cfg, l.Exclusive)
	}
}
