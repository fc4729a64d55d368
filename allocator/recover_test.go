package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// desktopPools is desktop-8c16t (CPU n and n+8 are one core's threads) as
// the plugin's tests configure it: exclusive 4-7,12-15, shared 2-3,10-11,
// infra the rest.
const desktopPools = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`

// shrunk is the same node after the exclusive pool lost two cores.
const shrunk = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "6-7,14-15"}
  shared: {cpus: "2-3,10-11"}
`

// sharedTookCore4 is the same node after the shared pool was given core 4
// (CPUs 4 and 12) of the exclusive pool.
const sharedTookCore4 = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "5-7,13-15"}
  shared: {cpus: "2-4,10-12"}
`

// withShared is a remembered container that also runs on the shared pool,
// which was shared when it was pinned.
func withShared(a Assignment, shared cpuset.CPUSet) Assignment {
	a.WithShared, a.Shared = true, shared
	return a
}

// remembered is a remembered exclusive container of its own pod.
func remembered(tb testing.TB, id, cpus, reserved string) Assignment {
	r := cpuset.New()
	if reserved != "" {
		r = set(tb, reserved)
	}
	cs := set(tb, cpus)
	return Assignment{ID: id, Pod: PodRef{Namespace: "ns", Name: "pod-" + id, UID: "uid-" + id}, Container: "c", Pool: pools.Exclusive,
		MilliCPU: int64(cs.Size()) * 1000, CPUs: cs, Reserved: r}
}

// TestRecoveryRules: a remembered container the runtime runs is readmitted
// (round 1), and one that does not run where it may is pinned again after
// the others (round 3), by the rules in recover.go.
func TestRecoveryRules(t *testing.T) {
	tests := []struct {
		name       string
		config     string
		before     []Assignment // readmitted first, where they run
		remembered Assignment
		damaged    bool
		runsOn     string     // the runtime's cpuset; "" is every CPU
		readmit    Readmitted // Readmit's outcome
		repin      Readmitted // Repin's, when Readmit says NeedsRepin
		cpus       string     // where it is then; "" when nothing was added
		reserved   string
		shared     string // its shared part then, for a shared-cpus container
		problem    string // what a Kept container's error says
	}{
		{name: "runs on its remembered CPUs: kept", config: desktopPools,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "4,12",
			readmit: Kept, cpus: "4,12"},
		{name: "runs on another free set of its size: kept where it runs", config: desktopPools,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "5,13",
			readmit: KeptWhereItRuns, cpus: "5,13"},
		{name: "hide-hyperthreads kept where it runs: the new core's sibling idles", config: desktopPools,
			remembered: remembered(t, "a", "4", "12"), runsOn: "5",
			readmit: KeptWhereItRuns, cpus: "5", reserved: "13"},
		{name: "runs on every CPU: repinned on its remembered CPUs", config: desktopPools,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "",
			readmit: NeedsRepin, repin: Repinned, cpus: "4,12"},
		{name: "runs on a set of another size: repinned", config: desktopPools,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "4-5,12-13",
			readmit: NeedsRepin, repin: Repinned, cpus: "4,12"},
		{name: "runs on another container's CPUs: repinned on its own", config: desktopPools,
			before:     []Assignment{remembered(t, "b", "5,13", "")},
			remembered: remembered(t, "a", "4,12", ""), runsOn: "5,13",
			readmit: NeedsRepin, repin: Repinned, cpus: "4,12"},
		{name: "runs on CPUs outside its pool: repinned", config: desktopPools,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "2,10",
			readmit: NeedsRepin, repin: Repinned, cpus: "4,12"},
		{name: "another container runs on its CPUs: the first keeps them", config: desktopPools,
			before:     []Assignment{remembered(t, "b", "4,12", "")},
			remembered: remembered(t, "a", "4,12", ""), runsOn: "4,12",
			readmit: NeedsRepin, repin: NeedsPlacement},
		{name: "damaged record: placed again, even where it runs", config: desktopPools,
			remembered: remembered(t, "a", "4,12", ""), damaged: true, runsOn: "4,12",
			readmit: NeedsRepin, repin: NeedsPlacement},
		{name: "pool shrank under it: kept where it runs, and told", config: shrunk,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "4,12",
			readmit: Kept, cpus: "4,12", problem: "outside pool exclusive"},
		{name: "pool shrank, runs on every CPU: placed again", config: shrunk,
			remembered: remembered(t, "a", "4,12", ""), runsOn: "",
			readmit: NeedsRepin, repin: NeedsPlacement},
		{name: "shared-cpus container whose exclusive part the shared pool now has: kept where it runs, and told", config: sharedTookCore4,
			remembered: withShared(remembered(t, "a", "4,12", ""), set(t, "2-3,10-11")), runsOn: "2-4,10-12",
			readmit: Kept, cpus: "4,12", shared: "2-3,10-11", problem: "CPUs 4,12 are outside pool exclusive"},
		{name: "shared-cpus container runs on another free set of its size: kept where it runs", config: desktopPools,
			remembered: withShared(remembered(t, "a", "4,12", ""), set(t, "2-3,10-11")), runsOn: "2-3,5,10-11,13",
			readmit: KeptWhereItRuns, cpus: "5,13", shared: "2-3,10-11"},
		{name: "shared member follows its pool wherever it runs", config: desktopPools,
			remembered: Assignment{ID: "s", Pool: pools.Shared, CPUs: set(t, "2"), Reserved: cpuset.New()}, runsOn: "",
			readmit: Kept, cpus: "2-3,10-11"},
		{name: "shared member with a damaged record still follows its pool", config: desktopPools,
			remembered: Assignment{ID: "s", Pool: pools.Shared, CPUs: set(t, "2"), Reserved: cpuset.New()}, damaged: true, runsOn: "0-15",
			readmit: Kept, cpus: "2-3,10-11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, "desktop-8c16t", tc.config)
			for _, b := range tc.before {
				_, outcome, err := a.Readmit(Remembered{Assignment: b, RunsOn: b.CPUs})
				require.NoError(t, err)
				require.Equal(t, Kept, outcome, "%s readmitted", b.ID)
			}
			r := Remembered{Assignment: tc.remembered, Damaged: tc.damaged, RunsOn: cpuset.New()}
			if tc.runsOn != "" {
				r.RunsOn = set(t, tc.runsOn)
			}
			_, outcome, err := a.Readmit(r)
			assert.Equal(t, tc.readmit, outcome, "Readmit: %s", outcome)
			if tc.problem != "" {
				assert.ErrorContains(t, err, tc.problem)
			} else {
				assert.NoError(t, err)
			}
			if outcome == NeedsRepin {
				_, isIn := a.Get(tc.remembered.ID)
				require.False(t, isIn, "nothing is added before Repin")
				_, outcome, err = a.Repin(r)
				assert.Equal(t, tc.repin, outcome, "Repin: %s (%v)", outcome, err)
				if outcome == NeedsPlacement {
					assert.Error(t, err, "Repin says why")
				}
			}
			got, ok := a.Get(tc.remembered.ID)
			if tc.cpus == "" {
				assert.False(t, ok, "nothing added, to be placed as new")
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.cpus, got.CPUs.String())
			assert.Equal(t, tc.reserved, got.Reserved.String())
			if got.WithShared {
				assert.Equal(t, tc.shared, got.Shared.String(), "the shared part")
			}
		})
	}
}

// TestReadmitEndsTheHoldOfTheContainersLastRun: a remembered container that
// runs again takes its last run's hold back.
func TestReadmitEndsTheHoldOfTheContainersLastRun(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	last := remembered(t, "a", "4,12", "")
	_, err := a.RestoreHold(Hold{Assignment: Assignment{ID: "old", Pod: last.Pod, Container: last.Container, Pool: pools.Exclusive,
		CPUs: set(t, "6,14"), Reserved: cpuset.New()}})
	require.NoError(t, err)
	require.Len(t, a.Holds(), 1)
	_, outcome, err := a.Readmit(Remembered{Assignment: last, RunsOn: last.CPUs})
	require.NoError(t, err)
	assert.Equal(t, Kept, outcome)
	assert.Empty(t, a.Holds())
	assert.True(t, set(t, "6,14").IsSubsetOf(a.FreeCPUs(pools.Exclusive)), "its CPUs are free again")
}
