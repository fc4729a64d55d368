package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// A hide-hyperthreads container placed on a core whose sibling was offline
// (a whole core by the rules: the offline sibling runs nothing) keeps that
// sibling idle when it comes online: the option's promise is idle siblings,
// and the sibling must not be handed to the next container.
func TestHiddenSiblingThatComesOnlineStaysIdle(t *testing.T) {
	const cfg = `isolatedCPUs: "2-7,10-15"`
	a := newAllocator(t, "desktop-8c16t", cfg)
	full := a.Topology()
	_, err := a.Allocate(exclusive("filler", 10)) // 5 whole cores
	require.NoError(t, err)
	f, _ := a.Get("filler")
	require.Equal(t, "2-6,10-14", f.CPUs.String())

	// CPU 15, the sibling of 7, goes offline.
	off := withOffline(full, 15)
	a, _ = a.Rebase(off, mustHotplug(t, a, off, cfg))
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	res, err := a.Allocate(hide)
	require.NoError(t, err)
	require.Equal(t, "7", res.Assignment.CPUs.String())
	require.True(t, res.Assignment.HideHyperthreads, "the option is recorded")

	// CPU 15 comes back online: it is the container's hidden sibling.
	a, _ = a.Rebase(full, mustHotplug(t, a, full, cfg))
	h, _ := a.Get("hide")
	assert.Equal(t, "7", h.CPUs.String())
	assert.Equal(t, "15", h.Reserved.String(), "the sibling that came online is held idle for it")
	assert.True(t, a.FreeCPUs("exclusive").IsEmpty(), "free: %s", a.FreeCPUs("exclusive"))
	_, err = a.Allocate(exclusive("other", 1))
	assert.Error(t, err, "no CPU is free: 15 is the hidden sibling of 7")

	// Released, the container gives both back.
	a.Release("hide")
	assert.Equal(t, "7,15", a.FreeCPUs("exclusive").String())
}

// A sibling that comes online while the container is stopped and its CPUs
// are held for its pod is held idle too: the container that runs again
// gets the hold's CPUs and hidden siblings.
func TestHiddenSiblingThatComesOnlineJoinsTheHold(t *testing.T) {
	const cfg = `isolatedCPUs: "2-7,10-15"`
	a := newAllocator(t, "desktop-8c16t", cfg)
	full := a.Topology()
	_, err := a.Allocate(exclusive("filler", 10))
	require.NoError(t, err)
	off := withOffline(full, 15)
	a, _ = a.Rebase(off, mustHotplug(t, a, off, cfg))
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	_, err = a.Allocate(hide)
	require.NoError(t, err)
	a.Stop("hide", nil)
	require.Len(t, a.Holds(), 1)

	a, _ = a.Rebase(full, mustHotplug(t, a, full, cfg))
	require.Len(t, a.Holds(), 1)
	assert.Equal(t, "15", a.Holds()[0].Reserved.String(), "the hold keeps the sibling that came online")
	assert.True(t, a.FreeCPUs("exclusive").IsEmpty(), "free: %s", a.FreeCPUs("exclusive"))
}

// At a restart, a hide-hyperthreads container remembered without hidden
// siblings (its core's sibling was offline when it was placed) gets them:
// kept where it runs on another core, from the option the record keeps
// (Reserved alone, empty, cannot tell); kept on its own core once its
// sibling is online, from ReserveHiddenSiblings once every container is
// back.
func TestRestartGivesAHideHyperthreadsContainerItsSiblings(t *testing.T) {
	const cfg = `isolatedCPUs: "2-7,10-15"`
	remembered := Assignment{ID: "hide", Pod: PodRef{Namespace: "ns", Name: "pod-hide", UID: "uid-hide"}, Container: "c",
		Pool: "exclusive", MilliCPU: 1000, CPUs: set(t, "7"), HideHyperthreads: true}

	a := newAllocator(t, "desktop-8c16t", cfg)
	_, outcome, err := a.Readmit(Remembered{Assignment: remembered, RunsOn: set(t, "6")})
	require.NoError(t, err)
	require.Equal(t, KeptWhereItRuns, outcome)
	h, _ := a.Get("hide")
	assert.Equal(t, "6", h.CPUs.String())
	assert.Equal(t, "14", h.Reserved.String(), "kept where it runs, with that core's sibling idle")

	a = newAllocator(t, "desktop-8c16t", cfg)
	_, outcome, err = a.Readmit(Remembered{Assignment: remembered, RunsOn: set(t, "7")})
	require.NoError(t, err)
	require.Equal(t, Kept, outcome)
	grown := a.ReserveHiddenSiblings()
	require.Len(t, grown, 1)
	assert.Equal(t, "15", grown[0].Reserved.String())
	assert.False(t, a.FreeCPUs("exclusive").Contains(15))
	assert.Empty(t, a.ReserveHiddenSiblings(), "nothing more to give")
}

// An exclusive-non-isolcpus hide-hyperthreads container takes its sibling
// that came online from infra, which would lend it: the sibling joins
// neither infra nor its members' cpusets.
func TestHiddenSiblingThatComesOnlineLeavesInfra(t *testing.T) {
	const cfg = "isolatedCPUs: \"4-7,12-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 3}}"
	a := newAllocator(t, "desktop-8c16t", cfg)
	full := a.Topology()
	off := withOffline(full, 9)
	a, _ = a.Rebase(off, mustHotplug(t, a, off, cfg))
	_, err := a.Allocate(Request{ID: "infra1", Pool: "infra"})
	require.NoError(t, err)
	hide := exclusive("hide", 1)
	hide.Pool = "exclusive-non-isolcpus"
	hide.Options.HideHyperthreads = true
	res, err := a.Allocate(hide)
	require.NoError(t, err)
	require.Equal(t, "1", res.Assignment.CPUs.String(), "the core whose sibling is offline is whole")
	require.Empty(t, res.Assignment.Reserved.List())

	a, moved := a.Rebase(full, mustHotplug(t, a, full, cfg))
	h, _ := a.Get("hide")
	assert.Equal(t, "9", h.Reserved.String())
	infra := a.PoolCPUs("infra")
	assert.False(t, infra.Contains(9), "infra %s lends 9 to the container", infra)
	m, _ := a.Get("infra1")
	assert.Equal(t, infra, m.CPUs, "the infra member is on infra as it is")
	assert.Empty(t, moved, "9 went to the container, not to infra: no member moves")
}

// siblingsSplitConfig is desktop-8c16t (CPU n's sibling is n+8) with
// exclusive on 4-7 and on 15 only: of the cores 4-7, only 7's sibling is
// exclusive's, 12-14 are shared's.
const siblingsSplitConfig = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,15"}
  shared: {cpus: "2-3,10-14"}
`

// newOfflineAllocator is an allocator on a fixture with CPUs offline as
// the kernel shows them (no topology for them) and the layout a running
// daemon builds then.
func newOfflineAllocator(t *testing.T, fixtureName, yaml string, offline cpuset.CPUSet) *Allocator {
	t.Helper()
	topo := discoverOffline(t, fixtureName, offline)
	cfg := parseConfig(t, yaml)
	l, problems := BuildLayoutRunning(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	return New(topo, l, cfg.PinMemory)
}

// A hide-hyperthreads container holds its core's offline sibling idle
// once it comes online, so a core whose offline sibling joins another
// pool then is no whole core for it: shared's load would run next to the
// container that asked for the core alone. It takes the core whose
// offline sibling is its pool's, and gets that sibling when it comes
// online; with none such, it is refused.
func TestHideHyperthreadsTakesNoCoreWhoseOfflineSiblingJoinsAnotherPool(t *testing.T) {
	a := newOfflineAllocator(t, "desktop-8c16t", siblingsSplitConfig, cpuset.New(12, 13, 14, 15))
	require.Equal(t, "4-7", a.PoolCPUs("exclusive").String())
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	res, err := a.Allocate(hide)
	require.NoError(t, err)
	assert.Equal(t, "7", res.Assignment.CPUs.String(), "the siblings 12-14 of 4-6 join shared when they come online")

	full := topology(t, "desktop-8c16t")
	a, _ = a.Rebase(full, mustHotplug(t, a, full, siblingsSplitConfig))
	h, _ := a.Get("hide")
	assert.Equal(t, "15", h.Reserved.String(), "its sibling came online idle for it")
	assert.Equal(t, "2-3,10-14", a.PoolCPUs("shared").String())
	assert.True(t, a.PoolCPUs("shared").Intersection(a.hiddenSiblings(h.CPUs).Union(h.CPUs)).IsEmpty(), "no shared CPU on its core")

	const none = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7"}
  shared: {cpus: "2-3,10-15"}
`
	a = newOfflineAllocator(t, "desktop-8c16t", none, cpuset.New(12, 13, 14, 15))
	_, err = a.Allocate(hide)
	assert.ErrorContains(t, err, "with idle siblings (0 whole cores free)", "every core's sibling joins shared")
	assert.ErrorContains(t, err, "; CPUs 4-7 set aside: offline siblings 12-15 join another pool when online", "the refusal says why")
}

// An offline sibling another container has (an offline CPU stays its
// owner's) is not free: a hide-hyperthreads container must not take its
// core, or it runs next to that container once the sibling is online.
func TestHideHyperthreadsTakesNoCoreWhoseOfflineSiblingIsAnothers(t *testing.T) {
	const cfg = `isolatedCPUs: "2-7,10-15"`
	a := newAllocator(t, "desktop-8c16t", cfg)
	_, _, err := a.Readmit(Remembered{Assignment: Assignment{ID: "other", Pod: PodRef{Namespace: "ns", Name: "pod-other", UID: "uid-other"}, Container: "c",
		Pool: "exclusive", MilliCPU: 1000, CPUs: set(t, "15")}, RunsOn: set(t, "15")})
	require.NoError(t, err)
	_, err = a.Allocate(exclusive("filler", 10))
	require.NoError(t, err)
	f, _ := a.Get("filler")
	require.Equal(t, "2-6,10-14", f.CPUs.String(), "7 is the only free CPU")

	off := discoverOffline(t, "desktop-8c16t", cpuset.New(15))
	a, _ = a.Rebase(off, mustHotplug(t, a, off, cfg))
	o, _ := a.Get("other")
	require.Equal(t, "15", o.CPUs.String(), "the offline CPU stays its container's")
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	_, err = a.Allocate(hide)
	assert.ErrorContains(t, err, "with idle siblings (0 whole cores free)", "7's sibling 15 is the other container's")
	assert.ErrorContains(t, err, "; CPU 7 set aside: offline sibling 15 belongs to another container", "the refusal says why")
}
