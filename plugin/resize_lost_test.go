package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// TestResizeLostToAKillKeepsTheGrownSet: an exclusive
// container is resized in place from 2 to 4 CPUs; the plugin replies, the
// runtime applies it, and the plugin is killed before the state write. The
// runtime now runs the container on 4 CPUs with a 4-CPU request; the file
// still says 2. After the restart the container must keep its 4 CPUs (the
// runtime is the truth) and no other container may get any of them.
func TestResizeLostToAKillKeepsTheGrownSet(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	_, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	grown := f.cpus(fwd)
	require.Equal(t, 4, mustParse(grown).Size(), "grown to %s", grown)
	first.kill()

	second := startPlugin(t, f, xeon, statePath(f))
	assert.Equal(t, grown, f.cpus(fwd), "the resized container keeps the CPUs it runs on")
	st := second.savedState(t)
	t.Logf("record after restart: %+v", st.Containers[fwd.Id])
	assert.Equal(t, int64(4000), st.Containers[fwd.Id].MilliCPU)
	other := f.runPod(podSpec{name: "o", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	oc, _, err := f.createContainer(other, "c", 4000)
	require.NoError(t, err)
	assert.True(t, mustParse(f.cpus(oc)).Intersection(mustParse(f.cpus(fwd))).IsEmpty(), "no double grant: %s vs %s", f.cpus(oc), f.cpus(fwd))
}

// TestShrinkLostToAKillMovesNoOne: an exclusive container
// grown to 6 CPUs (on disk) shrinks in place to 4, another exclusive container is created
// on the CPUs it gave back, and the plugin is killed before the state write.
// The file still gives the first container 6 CPUs. After the restart
// neither container may be moved: both run on CPUs that are theirs.
func TestShrinkLostToAKillMovesNoOne(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	_, err = f.updateContainer(pod, fwd, 6000)
	require.NoError(t, err)
	big := f.cpus(fwd)
	require.NoError(t, first.p.Flush())
	_, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	small := f.cpus(fwd)
	require.Equal(t, 4, mustParse(small).Size(), "shrunk to %s", small)
	other := f.runPod(podSpec{name: "o", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	oc, _, err := f.createContainer(other, "c", 1000)
	require.NoError(t, err)
	ocCPUs := f.cpus(oc)
	t.Logf("fwd %s -> %s, other on %s", big, small, ocCPUs)
	first.kill()

	startPlugin(t, f, xeon, statePath(f))
	assert.Equal(t, small, f.cpus(fwd), "fwd not moved")
	assert.Equal(t, ocCPUs, f.cpus(oc), "the other container is not moved")
	assert.True(t, mustParse(f.cpus(oc)).Intersection(mustParse(f.cpus(fwd))).IsEmpty(), "no double grant")
}

// TestRepairTakesNoCPUAContainerTheFileDoesNotKnowRunsOn: a remembered
// container that must be pinned again (here the runtime reports it on
// every CPU) is not put back on remembered CPUs that a container the file
// does not know runs on: that one, pinned there by a decision a kill kept
// from the file, stays; the remembered one is placed elsewhere.
func TestRepairTakesNoCPUAContainerTheFileDoesNotKnowRunsOn(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	_, err = f.updateContainer(pod, fwd, 6000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	_, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	other := f.runPod(podSpec{name: "o", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	oc, _, err := f.createContainer(other, "c", 1000)
	require.NoError(t, err)
	ocCPUs := f.cpus(oc)
	first.kill()
	f.setCPUs(fwd, "") // it runs on every CPU: it must be pinned again

	startPlugin(t, f, xeon, statePath(f))
	assert.Equal(t, ocCPUs, f.cpus(oc), "the container the file does not know is not moved")
	require.NotEmpty(t, f.cpus(fwd), "the remembered one is pinned again")
	assert.True(t, mustParse(f.cpus(oc)).Intersection(mustParse(f.cpus(fwd))).IsEmpty(), "no double grant: %s vs %s", f.cpus(oc), f.cpus(fwd))
}

// TestResizedContainerYieldsToOneWhoseRecordAgrees: two remembered
// containers the runtime runs on one CPU, one where its record says, the
// other on a set of another size than its record's (a resize the file did
// not record): the one whose record and runtime agree keeps its CPUs,
// whichever comes first by id, and the other is pinned again elsewhere.
func TestResizedContainerYieldsToOneWhoseRecordAgrees(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	podA := f.runPod(podSpec{name: "a", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	a, _, err := f.createContainer(podA, "c", 2000) // ctr-a-c: taken in before ctr-b-c
	require.NoError(t, err)
	podB := f.runPod(podSpec{name: "b", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	b, _, err := f.createContainer(podB, "c", 2000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	aOriginal := f.cpus(a)
	_, err = f.updateContainer(podA, a, 4000)
	require.NoError(t, err)
	first.kill()
	bCPUs := f.cpus(b)
	// The runtime runs a on 4 CPUs (its request): its own two and b's.
	aOn := mustParse(aOriginal).Union(mustParse(bCPUs))
	f.setCPUs(a, aOn.String())
	t.Logf("a on %s, b on %s", aOn, bCPUs)

	startPlugin(t, f, xeon, statePath(f))
	assert.Equal(t, bCPUs, f.cpus(b), "the container whose record agrees keeps its CPUs")
	assert.True(t, mustParse(f.cpus(a)).Intersection(mustParse(f.cpus(b))).IsEmpty(), "no double grant: %s vs %s", f.cpus(a), f.cpus(b))
}

// TestGrantedContainerIsNotKeptAsResized: a container of the
// cpupool.dev/exclusive resource can never be resized in place (the live
// path refuses it: TestResourceRouteRefusesCPUResize), so a restart that
// finds it on a set of another size than the kubelet's allocation has not
// found a lost resize. While the plugin was down something (the kubelet's
// static CPU manager, an operator's crictl update) pinned it on 2 of its 4
// devices, a set whose size happens to match its cpu request. ReadmitResized
// kept it on 2 CPUs and freed the 2 devices the kubelet still counts as
// this pod's; it is pinned back on the kubelet's allocation.
func TestGrantedContainerIsNotKeptAsResized(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "7", "14", "15")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	ctr, resp, err := f.createWithEnv(pod, "app", 2000, env)
	require.NoError(t, err)
	require.Equal(t, "6-7,14-15", resp.Adjust.Linux.Resources.Cpu.Cpus)
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(ctr, "6,14") // the kubelet's static CPU manager, for a 2-CPU request

	second := startPlugin(t, f, desktopKubelet, statePath(f))
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	t.Logf("after restart: allocator %s, runtime %s", a.CPUs, f.cpus(ctr))
	assert.Equal(t, "6-7,14-15", a.CPUs.String(), "the kubelet's allocation is the truth for its containers")
	assert.Equal(t, "6-7,14-15", f.cpus(ctr), "pinned back on its devices")
}

// TestLostResizeKeptOnlyInAShapeAResizeMakes: a
// full-pcpus-only container's lost resize is kept where the runtime runs
// it only if that set is one a live resize makes: whole cores. Here the
// runtime runs it on its core and two half cores (something else than a
// resize pinned it so) with a 4-CPU request; it was kept there. Now it is
// pinned back on its core and grown by whole cores, as a live resize to
// 4 CPUs grows it.
func TestLostResizeKeptOnlyInAShapeAResizeMakes(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "full-pcpus-only.cpupool.dev": "true"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	core := mustParse(f.cpus(fwd))
	require.Equal(t, "2,42", core.String(), "one whole core (precondition)")
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(fwd, "2-3,42,44") // 3 and 44: halves of the cores 3,43 and 4,44
	f.setRequest(fwd, 4000)

	second := startPlugin(t, f, xeon, statePath(f))
	a, ok := second.p.alloc.Get(fwd.GetId())
	require.True(t, ok)
	t.Logf("after restart: %s (%dm), runtime %s", a.CPUs, a.MilliCPU, f.cpus(fwd))
	assert.Equal(t, 4, a.CPUs.Size())
	assert.True(t, core.IsSubsetOf(a.CPUs), "it keeps its core")
	for _, id := range a.CPUs.List() {
		sibling := (id + 40) % 80
		assert.True(t, a.CPUs.Contains(sibling), "CPU %d without its sibling %d: not whole cores", id, sibling)
	}
	assert.Equal(t, a.CPUs.String(), f.cpus(fwd))
}

// TestRecordedGrowMovedOntoAnotherContainersCPUsYieldsToIt: as above, but
// the state file recorded a's grow before the kill (the writer was quick):
// a's record and what it runs on are of one size, the runtime runs it on
// b's CPUs as well, and b's record agrees with the runtime. Taken first by
// id, a was kept where it runs (allocator.KeptWhereItRuns) on CPUs b's
// agreeing record holds, and b, the container whose record and runtime
// agree, was moved (a load flake of the test above, whose writer was
// sometimes that quick).
func TestRecordedGrowMovedOntoAnotherContainersCPUsYieldsToIt(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	podA := f.runPod(podSpec{name: "a", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	a, _, err := f.createContainer(podA, "c", 2000) // ctr-a-c: taken in before ctr-b-c
	require.NoError(t, err)
	podB := f.runPod(podSpec{name: "b", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	b, _, err := f.createContainer(podB, "c", 2000)
	require.NoError(t, err)
	aOriginal := f.cpus(a)
	_, err = f.updateContainer(podA, a, 4000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush()) // the grow is recorded
	first.kill()
	bCPUs := f.cpus(b)
	aOn := mustParse(aOriginal).Union(mustParse(bCPUs))
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	require.Len(t, mustParse(st.Containers[a.Id].CPUs).List(), 4, "the grow is recorded")
	require.NotEqual(t, aOn.String(), st.Containers[a.Id].CPUs, "a's record is not where it runs")
	f.setCPUs(a, aOn.String())

	startPlugin(t, f, xeon, statePath(f))
	assert.Equal(t, bCPUs, f.cpus(b), "the container whose record agrees keeps its CPUs")
	assert.True(t, mustParse(f.cpus(a)).Intersection(mustParse(f.cpus(b))).IsEmpty(), "no double grant: %s vs %s", f.cpus(a), f.cpus(b))
}
