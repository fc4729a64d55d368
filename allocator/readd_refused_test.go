package allocator

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// readdState is what a refused re-add must leave as it found it: the
// holds, every CPU's owner, infra (what exclusive-non-isolcpus lends from
// it) and the memory counted per node (holds' and claims').
type readdState struct {
	holds  []Hold
	owner  []string
	infra  string
	memory []numamem.NodeMemoryUse
	old    []numamem.NodeMemory
}

func readdStateOf(a *Allocator) readdState {
	return readdState{holds: a.Holds(), owner: slices.Clone(a.owner), infra: a.PoolCPUs(pools.Infra).String(),
		memory: a.MemoryUse(), old: slices.Clone(a.mem.Held("old"))}
}

// A re-add at a restart (restore: Readmit's KeptWhereItRuns, Adopt; Repin)
// checks the container with the hold of its last run ended, since the
// hold's CPUs are its own. Refused (a CPU it asks for is another
// container's), it must leave the hold as it was: its CPUs owned, lent
// from infra, its memory counted and taken from its claim as before. Else
// the container placed anew next misses its hold, and the hold's CPUs and
// memory are free for anyone while its pod lives.
func TestARefusedReaddLeavesTheHoldOfItsLastRunAsItWas(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", "isolatedCPUs: \"1\"\nreservedCPUs: \"0\"\npools: {exclusive-non-isolcpus: {enabled: true}}")
	_, err := a.Allocate(Request{ID: "web", Pod: PodRef{UID: "uid-web"}, Container: "app", Pool: pools.Infra})
	require.NoError(t, err)
	b := exclusive("b", 1)
	b.Pool = pools.ExclusiveNonIsolcpus
	res, err := a.Allocate(b)
	require.NoError(t, err)
	require.Equal(t, "2", res.Assignment.CPUs.String())

	pod := PodRef{Namespace: "ns", Name: "pod-p", UID: "uid-p"}
	_, err = a.ReserveClaim(numamem.ClaimMemory{Key: "claim/mem", Held: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}}}, nil, false)
	require.NoError(t, err)
	a.BindClaim("claim/mem", pod.UID, "c")
	_, err = a.RestoreHold(Hold{Assignment: Assignment{ID: "old", Pod: pod, Container: "c", Pool: pools.ExclusiveNonIsolcpus,
		MilliCPU: 1000, CPUs: set(t, "3"), Reserved: cpuset.New(),
		Memory: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 24}}}}}})
	require.NoError(t, err)
	before := readdStateOf(a)
	require.Equal(t, "0", before.infra, "2 and 3 lent")
	require.Equal(t, int64(24), before.memory[0].HugePages[kb2M], "the hold's 24 pages, its claim's 16 within them")

	again := Assignment{ID: "new", Pod: pod, Container: "c", Pool: pools.ExclusiveNonIsolcpus, MilliCPU: 2000, CPUs: set(t, "2-3"), Reserved: cpuset.New()}
	_, err = a.restore(again)
	require.ErrorContains(t, err, "already held by container b")
	assert.Equal(t, before, readdStateOf(a), "restore refused")

	_, how, err := a.Repin(Remembered{Assignment: again, RunsOn: set(t, "2-3")})
	require.Error(t, err)
	require.Equal(t, NeedsPlacement, how)
	assert.Equal(t, before, readdStateOf(a), "Repin refused")

	// Accepted, it ends the hold: the container runs again.
	again.CPUs = set(t, "3")
	_, err = a.restore(again)
	require.NoError(t, err)
	assert.Empty(t, a.Holds())
	assert.Equal(t, "new", a.owner[3])
}

// restore also refuses a set with an offline CPU (an update naming it
// fails on cgroup v1): that refusal too leaves the hold of its last run
// as it was.
func TestARestoreRefusedForAnOfflineCPULeavesTheHoldOfItsLastRun(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	off := withOffline(a.Topology(), 7)
	b, _ := a.Rebase(off, mustHotplug(t, a, off, desktopPools))
	old := remembered(t, "old", "5", "")
	_, err := b.RestoreHold(Hold{Assignment: old})
	require.NoError(t, err)
	before := readdStateOf(b)

	again := old
	again.ID, again.CPUs, again.MilliCPU = "new", set(t, "5,7"), 2000
	_, err = b.restore(again)
	require.ErrorContains(t, err, "CPUs 7 are offline")
	assert.Equal(t, before, readdStateOf(b))
}
