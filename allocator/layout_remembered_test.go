package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// removedRemembered is full with cpus hot-removed, as the daemon sees the
// node then: put back at the place remembered while they were present.
func removedRemembered(full *sysfs.Topology, cpus ...int) *sysfs.Topology {
	rec, _ := full.Remember(sysfs.Remembered{})
	return unplugged(full, cpus...).WithRemembered(rec)
}

// TestHotRemovedCPURestartLaysOutTheRunningPools: after a vCPU is
// hot-removed, the running daemon's layout (HotplugLayout) and the layout
// a restart or a reload with the same config computes (BuildLayoutRunning
// on the node with the removed CPU remembered) are the same, whichever
// isolated CPU is removed, on one NUMA node and several: before, the
// restart carved the counts on the smaller node, moved CPUs between pools
// (or refused the count) and a restart moved exclusive containers.
func TestHotRemovedCPURestartLaysOutTheRunningPools(t *testing.T) {
	type tc struct{ fixture, config string }
	cases := []tc{
		{"desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"},
		{"desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 8}, shared: {count: 4}}\n"},
		{"desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 6}}\n"},
		{"desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 4}, shared: {count: 8}}\n"},
		{"vm-2numa-hugepages", "isolatedCPUs: \"1-3\"\npools: {exclusive: {count: 2}}\n"},
	}
	for _, name := range []string{"kubelet-dual-socket-ht", "xeon-2s-snc2", "epyc-1s-nps4", "kubelet-dual-socket-multi-numa-ht"} {
		ids := topology(t, name).Present.List()
		iso := cpuset.New(ids[2:]...)
		cases = append(cases, tc{name, fmt.Sprintf("isolatedCPUs: %q\nreservedCPUs: \"%d\"\npools: {exclusive: {count: %d}}\n", iso.String(), ids[0], iso.Size()/2)})
	}
	for _, c := range cases {
		full := topology(t, c.fixture)
		cfg := parseConfig(t, c.config)
		old, problems := BuildLayoutRunning(full, cfg)
		require.False(t, problems.HasErrors(), "%s: %v", c.fixture, problems)
		bad := 0
		for _, cpu := range full.Present.List() {
			topo := removedRemembered(full, cpu)
			running, _ := HotplugLayout(old, topo, cfg)
			restart, rp := BuildLayoutRunning(topo, cfg)
			if rp.HasErrors() {
				t.Errorf("%s %q unplug %d: restart refused: %v", c.fixture, c.config, cpu, rp.Errors())
				continue
			}
			same := running.Exclusive.Equals(restart.Exclusive) && running.Shared.Equals(restart.Shared) && running.Infra.Equals(restart.Infra) &&
				running.Reserved.Equals(restart.Reserved) && running.Isolated.Equals(restart.Isolated) && running.ExclusiveNonIsolcpus.Equals(restart.ExclusiveNonIsolcpus)
			if !same && bad < 3 {
				bad++
				t.Errorf("%s %q unplug %d: running ex=%s sh=%s infra=%s; restart ex=%s sh=%s infra=%s", c.fixture, c.config, cpu,
					running.Exclusive, running.Shared, running.Infra, restart.Exclusive, restart.Shared, restart.Infra)
			}
		}
	}
}

// TestHotRemovedCPUComesBackAfterARestart: unplug CPU 2, restart (with
// CPU 2 remembered), plug CPU 2 back: the running layout is what a
// restart on the whole node lays out.
func TestHotRemovedCPUComesBackAfterARestart(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 6}}\n")
	want, _ := BuildLayoutRunning(full, cfg)
	restarted, rp := BuildLayoutRunning(removedRemembered(full, 2), cfg)
	require.False(t, rp.HasErrors(), "%v", rp)
	back, _ := HotplugLayout(restarted, full, cfg)
	assert.Equal(t, want.Exclusive.String(), back.Exclusive.String())
	assert.Equal(t, want.Infra.String(), back.Infra.String())
}

// TestCPUNeverPresentIsAnErrorOnALargePossibleVM: a VM whose cpu/possible
// is 0-255 with 16 vCPUs present: a CPU no record remembers (a typo, a
// config of a bigger node) is still an error, for the daemon and
// validate alike; one remembered is a warning that says so.
func TestCPUNeverPresentIsAnErrorOnALargePossibleVM(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	full.Possible = full.Present.Union(cpuset.New(200, 255))
	for _, c := range []string{
		"isolatedCPUs: \"2-7,10-15,200\"\n",
		"isolatedCPUs: \"2-31\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 28}}\n",
	} {
		_, problems := BuildLayoutRunning(removedRemembered(full, 15), parseConfig(t, c))
		assert.True(t, problems.HasErrors(), "%q on a 16-vCPU VM (possible 0-255) is only warned: %v", c, problems.Warnings())
	}
	_, problems := BuildLayoutRunning(removedRemembered(full, 15), parseConfig(t, "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"))
	require.False(t, problems.HasErrors(), "%v", problems)
	var said []string
	for _, p := range problems.Warnings() {
		said = append(said, p.Message)
	}
	assert.Contains(t, fmt.Sprint(said), "CPU 15 is configured but not present")
}
