package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
)

// TestReadmitResized: a remembered exclusive container the runtime runs on
// a set of another size, with the request of an in-place resize whose
// record a kill lost, is kept where it runs with that request, if it may
// run there; otherwise nothing is added and the error says why.
func TestReadmitResized(t *testing.T) {
	grown := remembered(t, "a", "4,12", "")
	grownTwice := remembered(t, "a", "4-5,12-13", "")
	grownTwice.MilliCPU, grownTwice.Added = 4000, []int{5, 13}
	tests := []struct {
		name     string
		before   []Assignment // readmitted first, where they run
		record   Assignment
		damaged  bool
		runsOn   string
		milli    int64
		cpus     string // where it is then; "" when nothing was added
		reserved string
		added    []int
		original string
		err      string
	}{
		{name: "grown: kept with the CPUs it grew by as added", record: grown, runsOn: "4-5,12-13", milli: 4000,
			cpus: "4-5,12-13", added: []int{5, 13}, original: "4,12"},
		{name: "shrunk: the added CPUs it still runs on keep their order", record: grownTwice, runsOn: "4,12-13", milli: 3000,
			cpus: "4,12-13", added: []int{13}, original: "4,12"},
		{name: "grown again after a recorded grow: the record's added come first", record: grownTwice, runsOn: "4-6,12-14", milli: 6000,
			cpus: "4-6,12-14", added: []int{5, 13, 6, 14}, original: "4,12"},
		{name: "no longer on its original set: all of it counts as original", record: grown, runsOn: "5-6,13-14", milli: 4000,
			cpus: "5-6,13-14", original: "5-6,13-14"},
		{name: "hide-hyperthreads: the new cores' siblings idle", record: remembered(t, "a", "4", "12"), runsOn: "4-5", milli: 2000,
			cpus: "4-5", reserved: "12-13", original: "4", added: []int{5}},
		{name: "the set is not of the size of the request: not a resize", record: grown, runsOn: "4-5,12-13", milli: 3000,
			err: "requests 3000m (3 CPUs)"},
		{name: "the same size as the record: not a resize", before: []Assignment{remembered(t, "b", "5,13", "")},
			record: grown, runsOn: "5,13", milli: 2000, err: "not resized"},
		{name: "a CPU another container runs on: that one keeps it", before: []Assignment{remembered(t, "b", "5,13", "")},
			record: grown, runsOn: "4-5,12-13", milli: 4000, err: "already held by container b"},
		{name: "outside its pool", record: grown, runsOn: "2,4,10,12", milli: 4000,
			err: "outside pool exclusive"},
		{name: "damaged record", record: grown, damaged: true, runsOn: "4-5,12-13", milli: 4000,
			err: "damaged"},
		{name: "not pinned", record: grown, runsOn: "", milli: 4000,
			err: "does not pin it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, "desktop-8c16t", desktopPools)
			for _, b := range tc.before {
				_, outcome, err := a.Readmit(Remembered{Assignment: b, RunsOn: b.CPUs})
				require.NoError(t, err)
				require.Equal(t, Kept, outcome, "%s readmitted", b.ID)
			}
			r := Remembered{Assignment: tc.record, Damaged: tc.damaged, RunsOn: cpuset.New()}
			if tc.runsOn != "" {
				r.RunsOn = set(t, tc.runsOn)
			}
			_, outcome, _ := a.Readmit(r)
			require.Equal(t, NeedsRepin, outcome, "Readmit leaves it to ReadmitResized")
			res, err := a.ReadmitResized(r, Request{MilliCPU: tc.milli})
			got, ok := a.Get(tc.record.ID)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				assert.False(t, ok, "nothing added")
				return
			}
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, tc.cpus, got.CPUs.String())
			assert.Equal(t, tc.cpus, res.Assignment.CPUs.String())
			assert.Equal(t, tc.milli, got.MilliCPU, "its request is the runtime's")
			assert.Equal(t, tc.reserved, got.Reserved.String())
			assert.Equal(t, tc.added, got.Added)
			assert.Equal(t, tc.original, got.Original().String())
			assert.True(t, got.Held().Intersection(a.FreeCPUs(got.Pool)).IsEmpty(), "its CPUs are taken")
		})
	}
}

// TestReadmitResizedWithAnOfflineCPU: a grow 2->4 the file lost, one of
// the CPUs it added offline at the restart. cgroup v2 keeps it in the
// cpuset (the runtime shows all 4): kept, the offline one held offline;
// it panicked in returnOrder (an offline CPU has no core in the index).
// cgroup v1 drops it (the runtime shows 3 for a 4-CPU request): the one
// offline CPU nobody holds is the missing one, held offline.
func TestReadmitResizedWithAnOfflineCPU(t *testing.T) {
	full := newAllocator(t, "desktop-8c16t", relayoutPools)
	cfg := parseConfig(t, relayoutPools)
	off := withOffline(full.Topology(), 13)
	l, problems := HotplugLayout(full.Layout(), off, cfg)
	require.Empty(t, problems)
	for _, tc := range []struct{ name, runsOn string }{{"cgroup v2", "4-5,12-13"}} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := full.Rebase(off, l)
			r := Remembered{Assignment: remembered(t, "a", "4,12", ""), RunsOn: set(t, tc.runsOn)}
			res, err := a.ReadmitResized(r, Request{MilliCPU: 4000})
			require.NoError(t, err)
			assert.Equal(t, "4-5,12-13", res.Assignment.CPUs.String())
			assert.Equal(t, int64(4000), res.Assignment.MilliCPU)
			assert.Equal(t, "4,12", res.Assignment.Original().String())
			assert.Equal(t, map[string]cpuset.CPUSet{"a": cpuset.New(13)}, a.OfflineHeld())
		})
	}
}

// TestReadmitResizedRefusesGrantedAndClaimed: the kubelet's devices or a
// DRA claim decide such a container's CPUs and no live resize changes them
// (the plugin refuses it), so a set of another size is no lost resize.
func TestReadmitResizedRefusesGrantedAndClaimed(t *testing.T) {
	for _, kind := range []string{RuleDevicePlugin, RuleClaim} {
		a := newAllocator(t, "desktop-8c16t", desktopPools)
		rec := remembered(t, "a", "4-5,12-13", "")
		rec.MilliCPU, rec.Rule = 4000, Rule{Kind: kind}
		_, err := a.ReadmitResized(Remembered{Assignment: rec, RunsOn: set(t, "4,12")}, Request{MilliCPU: 2000})
		require.Error(t, err, kind)
		_, in := a.Get("a")
		assert.False(t, in, kind)
	}
}

// TestReadmitResizedDoesNotGuessAnOfflineCPU: on cgroup v1 the runtime
// shows 3 CPUs for a 4-CPU request; two offline CPUs nobody holds could
// be the missing one, so none is taken and the size check refuses.
func TestReadmitResizedDoesNotGuessAnOfflineCPU(t *testing.T) {
	full := newAllocator(t, "desktop-8c16t", relayoutPools)
	off := withOffline(full.Topology(), 7, 13)
	l, problems := HotplugLayout(full.Layout(), off, parseConfig(t, relayoutPools))
	require.Empty(t, problems)
	a, _ := full.Rebase(off, l)
	r := Remembered{Assignment: remembered(t, "a", "4,12", ""), RunsOn: set(t, "4-5,12")}
	_, err := a.ReadmitResized(r, Request{MilliCPU: 4000})
	require.Error(t, err)
	assert.Empty(t, a.OfflineHeld())
}

// TestReadmitResizedRefusesHideHyperthreadsOnBothThreads: a
// hide-hyperthreads container grows by whole cores, one thread each, the
// siblings idle; no live resize puts it on both threads of one core, so a
// record of core 4 (sibling 12 hidden) that runs on 4,12 with a 2-CPU
// request is not kept there.
func TestReadmitResizedRefusesHideHyperthreadsOnBothThreads(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	rec := remembered(t, "a", "4", "12")
	_, err := a.ReadmitResized(Remembered{Assignment: rec, RunsOn: set(t, "4,12")}, Request{MilliCPU: 2000})
	require.Error(t, err)
	_, in := a.Get("a")
	assert.False(t, in)
}

// TestReadmitResizedKeepsOnlyTheShapeALiveResizeMakes: a
// lost resize is kept where the runtime runs it only in a shape a live
// grow or shrink makes under the options a live resize reads (the
// request's: the pod's annotations over its pool's configuration). A
// full-pcpus-only container grows and shrinks by whole cores, a
// hide-hyperthreads one by cores, one thread each, the siblings idle,
// even when its record (older than schema 8, or placed while its sibling
// was offline) does not say it hides them. Before, only the record's
// hidden siblings were checked: each refused case here was kept.
func TestReadmitResizedKeepsOnlyTheShapeALiveResizeMakes(t *testing.T) {
	full := config.Allocation{FullPCPUsOnly: true}
	hide := config.Allocation{HideHyperthreads: true}
	grown := remembered(t, "a", "4,12", "")
	grownTwice := remembered(t, "a", "4-6,12-14", "")
	grownTwice.MilliCPU, grownTwice.Added = 6000, []int{5, 13, 6, 14}
	hidden := remembered(t, "a", "4", "12")
	hidden.HideHyperthreads = true
	tests := []struct {
		name     string
		record   Assignment
		opts     config.Allocation
		runsOn   string
		milli    int64
		reserved string // kept: its hidden siblings
		err      string // refused: what the error says
	}{
		{name: "full-pcpus-only: a grow to half a core", record: grown, opts: full, runsOn: "4-5,12", milli: 3000,
			err: "full-pcpus-only takes whole cores"},
		{name: "full-pcpus-only: a grow by two half cores", record: grown, opts: full, runsOn: "4-5,12,14", milli: 4000,
			err: "full-pcpus-only"},
		{name: "full-pcpus-only: a shrink by two half cores", record: grownTwice, opts: full, runsOn: "4-5,12,14", milli: 4000,
			err: "full-pcpus-only"},
		{name: "full-pcpus-only: a grow by a whole core", record: grown, opts: full, runsOn: "4-5,12-13", milli: 4000},
		{name: "full-pcpus-only: a shrink by a whole core", record: grownTwice, opts: full, runsOn: "4-5,12-13", milli: 4000},
		{name: "hide-hyperthreads by its options: both threads of one core", record: remembered(t, "a", "4", ""), opts: hide,
			runsOn: "4,12", milli: 2000, err: "threads of one core"},
		{name: "hide-hyperthreads by its options: a core, one thread", record: remembered(t, "a", "4", ""), opts: hide,
			runsOn: "4-5", milli: 2000, reserved: "12-13"},
		{name: "hide-hyperthreads wins over full-pcpus-only: any count", record: hidden,
			opts: config.Allocation{HideHyperthreads: true, FullPCPUsOnly: true}, runsOn: "4-6", milli: 3000, reserved: "12-14"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, "desktop-8c16t", desktopPools)
			r := Remembered{Assignment: tc.record, RunsOn: set(t, tc.runsOn)}
			res, err := a.ReadmitResized(r, Request{MilliCPU: tc.milli, Options: tc.opts})
			got, in := a.Get("a")
			if tc.err != "" {
				if err == nil {
					t.Logf("kept on %s, reserved %s", res.Assignment.CPUs, res.Assignment.Reserved)
				}
				assert.ErrorContains(t, err, tc.err)
				assert.False(t, in, "nothing added")
				return
			}
			require.NoError(t, err)
			require.True(t, in)
			assert.Equal(t, tc.runsOn, got.CPUs.String())
			assert.Equal(t, tc.reserved, got.Reserved.String())
			if tc.reserved != "" {
				assert.True(t, got.HideHyperthreads, "it hides its siblings, as a record of a resize's says")
			}
		})
	}
}
