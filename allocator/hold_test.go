package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

func exitCode(c int32) *int32 { return &c }

// inPod is a request for another container of the same pod as r.
func inPod(r Request, id, name string, cpus int) Request {
	o := r
	o.ID, o.Container, o.MilliCPU = id, name, int64(cpus)*1000
	return o
}

func TestStoppedContainerKeepsItsCPUsForItsPod(t *testing.T) {
	for _, tc := range []struct {
		fixture, config string
		size            int
	}{
		{"vm-2cpu", `isolatedCPUs: "1"`, 1},
		{"desktop-8c16t", `isolatedCPUs: "2-7,10-15"`, 2},
		{"xeon-2s-interleaved", "", 4},
		{"epyc-1s-nps4", `isolatedCPUs: "8-63,72-127"`, 3},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			a := newAllocator(t, tc.fixture, tc.config)
			all := a.Layout().Pool(pools.Exclusive).Size()
			crash := exclusive("crash", tc.size)
			first, err := a.Allocate(crash)
			require.NoError(t, err)
			if all > tc.size {
				_, err = a.Allocate(exclusive("filler", all-tc.size))
				require.NoError(t, err, "the rest of the pool")
			}
			a.Stop("crash", exitCode(137))
			a.Release("filler")
			assert.Equal(t, all-tc.size, a.FreeCPUs(pools.Exclusive).Size(), "held CPUs are not free")
			_, err = a.Allocate(exclusive("other", all))
			assert.ErrorContains(t, err, "cannot fit", "another pod cannot take held CPUs")
			_, err = a.Allocate(inPod(crash, "sibling", "sidecar", tc.size+all))
			assert.Error(t, err)

			again := inPod(crash, "crash-2", "c", tc.size)
			res, err := a.Allocate(again)
			require.NoError(t, err)
			assert.Equal(t, first.Assignment.CPUs, res.Assignment.CPUs, "the next run gets exactly its CPUs")
			assert.Empty(t, a.Holds(), "the hold ends with the next run")
		})
	}
}

// TestInitContainerCPUsGoToTheAppContainer: on a 2-CPU node with one
// exclusive CPU, an exclusive init container completes and the app
// container asks for the same CPU: it gets it, as the kubelet's reuse of
// init containers' CPUs gives it.
func TestInitContainerCPUsGoToTheAppContainer(t *testing.T) {
	a := newAllocator(t, "vm-2cpu", `isolatedCPUs: "1"`)
	init := exclusive("init", 1)
	init.Container = "init"
	_, err := a.Allocate(init)
	require.NoError(t, err)
	a.Stop("init", exitCode(0))
	_, err = a.Allocate(exclusive("stranger", 1))
	assert.Error(t, err, "another pod cannot take it meanwhile")

	app, err := a.Allocate(inPod(init, "app", "app", 1))
	require.NoError(t, err)
	assert.Equal(t, "1", app.Assignment.CPUs.String())
	assert.Empty(t, a.Holds(), "the whole hold was reused")
	a.Release("app")
	assert.Equal(t, "1", a.FreeCPUs(pools.Exclusive).String())
}

func TestReuseOfHeldCPUs(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`) // exclusive 2-7,10-15
	init := exclusive("init", 4)
	init.Container = "init"
	first, err := a.Allocate(init)
	require.NoError(t, err)
	require.Equal(t, "2-3,10-11", first.Assignment.CPUs.String())
	a.Stop("init", exitCode(0))

	// Free CPUs are plenty, yet the app container takes the held ones: the
	// scheduler counted the pod once, for the larger of its init and app
	// containers.
	app, err := a.Allocate(inPod(init, "app", "app", 2))
	require.NoError(t, err)
	assert.True(t, app.Assignment.CPUs.IsSubsetOf(first.Assignment.CPUs), "reused %s", app.Assignment.CPUs)
	holds := a.Holds()
	require.Len(t, holds, 1, "what the app container did not reuse stays held for the pod")
	assert.Equal(t, first.Assignment.CPUs.Difference(app.Assignment.CPUs), holds[0].CPUs)

	// A larger container of the pod takes the rest and free CPUs.
	big, err := a.Allocate(inPod(init, "big", "big", 4))
	require.NoError(t, err)
	assert.True(t, holds[0].CPUs.IsSubsetOf(big.Assignment.CPUs), "%s reuses %s", big.Assignment.CPUs, holds[0].CPUs)
	assert.Empty(t, a.Holds())

	// A failed container's CPUs are its own: it is being restarted.
	crash := exclusive("crash", 2)
	c, err := a.Allocate(crash)
	require.NoError(t, err)
	a.Stop("crash", exitCode(1))
	other, err := a.Allocate(inPod(crash, "late", "late", 2))
	require.NoError(t, err)
	assert.True(t, other.Assignment.CPUs.Intersection(c.Assignment.CPUs).IsEmpty(), "a failed container is not a donor")
	require.Len(t, a.Holds(), 1)

	// Another pod never reuses.
	a.Stop("late", exitCode(0))
	stranger, err := a.Allocate(exclusive("stranger", 2))
	require.NoError(t, err)
	assert.True(t, stranger.Assignment.CPUs.Intersection(c.Assignment.CPUs.Union(other.Assignment.CPUs)).IsEmpty())
}

func TestReleasePodEndsHoldsAndInfraGrowsBack(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive-non-isolcpus: {enabled: true}}")
	infra, err := a.Allocate(Request{ID: "web", Pod: PodRef{UID: "uid-web"}, Container: "app", Pool: pools.Infra})
	require.NoError(t, err)
	require.Equal(t, "0-1,8-9", infra.Assignment.CPUs.String())
	eni := exclusive("eni", 1)
	eni.Pool = pools.ExclusiveNonIsolcpus
	res, err := a.Allocate(eni)
	require.NoError(t, err)
	require.Equal(t, "1", res.Assignment.CPUs.String())
	fwd := inPod(eni, "fwd", "fwd", 2)
	fwd.Pool = pools.Exclusive
	ex, err := a.Allocate(fwd)
	require.NoError(t, err)

	stop := a.Stop("eni", exitCode(2))
	assert.False(t, stop.InfraChanged, "a held CPU stays out of infra: infra containers are not churned by a crash loop")
	assert.Equal(t, "0,8-9", a.PoolCPUs(pools.Infra).String())
	a.Stop("fwd", nil)
	assert.Len(t, a.Holds(), 2)

	released, rel := a.ReleasePod("uid-other")
	assert.Empty(t, released)
	assert.False(t, rel.InfraChanged)
	released, rel = a.ReleasePod(eni.Pod.UID)
	assert.Empty(t, released)
	assert.Empty(t, a.Holds())
	assert.True(t, rel.InfraChanged)
	require.Len(t, rel.Updates, 1)
	assert.Equal(t, "0-1,8-9", rel.Updates[0].CPUs.String())
	assert.True(t, ex.Assignment.CPUs.IsSubsetOf(a.FreeCPUs(pools.Exclusive)))

	// A pod released while a container still runs (the runtime skipped its
	// stop) loses that assignment too.
	_, err = a.Allocate(inPod(eni, "run", "run", 1))
	require.NoError(t, err)
	released, _ = a.ReleasePod(eni.Pod.UID)
	require.Len(t, released, 1)
	assert.Equal(t, "run", released[0].ID)
}

func TestRestoreHold(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	h := Hold{Assignment: Assignment{ID: "old", Pod: PodRef{UID: "u"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "10,50")}, ExitCode: exitCode(3)}
	_, err := a.RestoreHold(h)
	require.NoError(t, err)
	assert.False(t, a.FreeCPUs(pools.Exclusive).Contains(10))

	for name, bad := range map[string]Hold{
		"in use":         {Assignment: Assignment{ID: "x", Pod: PodRef{UID: "v"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "50")}},
		"outside pool":   {Assignment: Assignment{ID: "x", Pod: PodRef{UID: "v"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "0")}},
		"offline":        {Assignment: Assignment{ID: "x", Pod: PodRef{UID: "v"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "500")}},
		"no pod":         {Assignment: Assignment{ID: "x", Container: "c", Pool: pools.Exclusive, CPUs: set(t, "12")}},
		"shared pool":    {Assignment: Assignment{ID: "x", Pod: PodRef{UID: "v"}, Container: "c", Pool: pools.Shared, CPUs: set(t, "12")}},
		"empty cpuset":   {Assignment: Assignment{ID: "x", Pod: PodRef{UID: "v"}, Container: "c", Pool: pools.Exclusive}},
		"no container":   {Assignment: Assignment{ID: "x", Pod: PodRef{UID: "v"}, Pool: pools.Exclusive, CPUs: set(t, "12")}},
		"runs (no hold)": {Assignment: Assignment{ID: "run", Pod: PodRef{UID: "v"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "14")}},
	} {
		if name == "runs (no hold)" {
			_, err := a.Allocate(Request{ID: "run", Pod: PodRef{UID: "w"}, Container: "d", Pool: pools.Infra})
			require.NoError(t, err)
		}
		_, err := a.RestoreHold(bad)
		assert.Error(t, err, name)
	}
	assert.Len(t, a.Holds(), 1)

	// A running container of the same pod and name ends the hold.
	_, err = a.restore(Assignment{ID: "new", Pod: PodRef{UID: "u"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "12,52")})
	require.NoError(t, err)
	assert.Empty(t, a.Holds())
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(10))
}
