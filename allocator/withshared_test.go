package allocator

import (
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// desktopShared is the desktop (siblings N and N+8) with 8 exclusive
// CPUs, a 4-CPU shared pool and CPUs lent by infra; the shared pool is
// the telco and web namespaces'.
const desktopShared = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  shared: [telco, web]
`

// TestPolicyWithShared: an exclusive container asks for the shared pool
// too; the pool's namespace rules apply, only exclusive pools can add it,
// and keeping the CFS quota with it is refused, saying why.
func TestPolicyWithShared(t *testing.T) {
	const key = "shared-cpus.cpupool.dev"
	for _, tc := range []struct {
		name, pool, ns string
		ann            map[string]string
		want           bool
		err            string
	}{
		{"asked", pools.Exclusive, "telco", map[string]string{key: "true"}, true, ""},
		{"asked by the container", pools.ExclusiveNonIsolcpus, "telco", map[string]string{key + "/container.c": "true", key + "/pod": "false"}, true, ""},
		{"declined", pools.Exclusive, "telco", map[string]string{key: "false"}, false, ""},
		{"not asked", pools.Exclusive, "telco", nil, false, ""},
		{"namespace may not use shared", pools.Exclusive, "batch", map[string]string{key: "true"}, false, `annotation shared-cpus.cpupool.dev="true": namespace "batch" may not use pool shared (allowedNamespaces.shared: [telco web])`},
		{"shared container", pools.Shared, "telco", map[string]string{key: "true"}, false, "the shared pool is added to a container's exclusive CPUs, and the container goes to shared (use pool.cpupool.dev: shared for the shared pool alone)"},
		{"quota kept", pools.Exclusive, "telco", map[string]string{key: "true", "disable-cpu-quota.cpupool.dev/container.c": "false"}, false,
			"the container's CFS quota would throttle its exclusive CPUs' threads whenever its shared CPUs' threads are busy (one quota covers the whole container), so it is always lifted with the shared pool; remove disable-cpu-quota.cpupool.dev/container.c=\"false\""},
		{"quota lifted", pools.Exclusive, "telco", map[string]string{key: "true", "disable-cpu-quota.cpupool.dev": "true"}, true, ""},
		{"not a boolean", pools.Exclusive, "telco", map[string]string{key: "both"}, false, `annotation shared-cpus.cpupool.dev="both": not a boolean`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(parseConfig(t, desktopShared), nil)
			ann := map[string]string{"pool.cpupool.dev": tc.pool}
			maps.Copy(ann, tc.ann)
			req, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: tc.ns}, MilliCPU: 1000, Annotations: ann}, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, req.WithShared)
		})
	}
}

func mixed(id string, cpus int) Request {
	req := exclusive(id, cpus)
	req.WithShared = true
	return req
}

// TestExclusiveWithShared: the container holds its exclusive CPUs like any
// exclusive container (the pool's accounting, its hold, a resize); its
// cpuset adds the shared pool, its memory nodes are those of both parts,
// its quota is lifted even where the config keeps quotas.
func TestExclusiveWithShared(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopShared+"allocation: {disableCPUQuota: false}\n")
	res, err := a.Allocate(mixed("dpdk", 2))
	require.NoError(t, err)
	as := res.Assignment
	assert.Equal(t, 2, as.CPUs.Size())
	assert.True(t, as.CPUs.IsSubsetOf(set(t, "4-7,12-15")))
	assert.Equal(t, "2-3,10-11", as.Shared.String())
	assert.Equal(t, as.CPUs.Union(set(t, "2-3,10-11")).String(), as.Cpuset().String())
	assert.True(t, as.NoCPUQuota, "lifted whatever the config says")
	assert.Equal(t, 6, a.FreeCPUs(pools.Exclusive).Size(), "only the exclusive part is the pool's")
	assert.Equal(t, "2-3,10-11", a.PoolCPUs(pools.Shared).String(), "the shared pool stays whole")

	plain, err := a.Allocate(exclusive("plain", 1))
	require.NoError(t, err)
	assert.False(t, plain.Assignment.NoCPUQuota, "the config's choice for the others")
	assert.Equal(t, plain.Assignment.CPUs, plain.Assignment.Cpuset())

	// The exclusive part grows; the shared part stays the pool.
	grown, err := a.Resize(Request{ID: "dpdk", MilliCPU: 3000, NUMANodes: cpuset.New(), PreferNUMA: cpuset.New(), WithShared: true})
	require.NoError(t, err)
	assert.Equal(t, 3, grown.Assignment.CPUs.Size())
	assert.True(t, as.CPUs.IsSubsetOf(grown.Assignment.CPUs), "the exclusive part never moves")
	assert.Equal(t, "2-3,10-11", grown.Assignment.Shared.String())

	// Stopped: the hold is the exclusive part; the next run gets it back
	// with the shared pool.
	code := int32(1)
	a.Stop("dpdk", &code)
	require.Len(t, a.Holds(), 1)
	assert.Equal(t, grown.Assignment.CPUs.String(), a.Holds()[0].Held().String())
	again := mixed("dpdk-1", 3)
	again.Pod, again.Container = grown.Assignment.Pod, grown.Assignment.Container
	next, err := a.Allocate(again)
	require.NoError(t, err)
	assert.Equal(t, grown.Assignment.CPUs.String(), next.Assignment.CPUs.String())
	assert.Equal(t, grown.Assignment.Cpuset().String(), next.Assignment.Cpuset().String())
}

// TestWithSharedNeedsASharedPool: without shared CPUs the request is
// refused, saying what to change, and nothing is held.
func TestWithSharedNeedsASharedPool(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `
isolatedCPUs: "2-7,10-15"
pools:
  exclusive: {cpus: "4-7,12-15"}
`)
	_, err := a.Allocate(mixed("dpdk", 2))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool shared has no CPUs on this node, and container ns/pod-dpdk/c asks for them (shared-cpus.cpupool.dev); configure pools.shared or remove the annotation")
	assert.Equal(t, 8, a.FreeCPUs(pools.Exclusive).Size())
}

// TestAdoptWithShared: a container that runs on its exclusive CPUs and the
// shared pool, unknown to the state, keeps its exclusive part.
func TestAdoptWithShared(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopShared)
	res, how, err := a.Adopt(mixed("dpdk", 2), set(t, "2-3,6,10-11,14"), cpuset.New())
	require.NoError(t, err)
	assert.Equal(t, StaysWhereItRuns, how)
	assert.Equal(t, "6,14", res.Assignment.CPUs.String())
	assert.Equal(t, "2-3,6,10-11,14", res.Assignment.Cpuset().String())
}

// TestFollowShared: the shared part follows the pool as shared members do,
// here when an exclusive container kept where it ran after a config change
// holds one of the pool's CPUs: at once (followInfra), so FollowShared,
// which Synchronize calls after every container is placed, finds nothing
// more.
func TestFollowShared(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopShared)
	_, err := a.restore(Assignment{ID: "dpdk", Pod: PodRef{UID: "u1"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "6"),
		WithShared: true, Shared: set(t, "2-3,10-11")})
	require.NoError(t, err)
	_, err = a.restore(Assignment{ID: "member", Pod: PodRef{UID: "u2"}, Container: "c", Pool: pools.Shared, CPUs: set(t, "2-3,10-11")})
	require.NoError(t, err)
	res, err := a.keep(Assignment{ID: "old", Pod: PodRef{UID: "u3"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "3")})
	require.Error(t, err, "outside its pool as now configured: kept anyway")
	require.Len(t, res.Updates, 2, "they follow the pool as the decision changes it")
	assert.False(t, res.InfraChanged)
	dpdk, _ := a.Get("dpdk")
	assert.Equal(t, "2,10-11", dpdk.Shared.String())
	assert.Equal(t, "2,6,10-11", dpdk.Cpuset().String())
	member, _ := a.Get("member")
	assert.Equal(t, "2,10-11", member.CPUs.String())
	assert.Empty(t, a.FollowShared(), "nothing more to follow")
}

// TestReadmitWithShared: a remembered container with a shared part is kept
// by its exclusive part, wherever the shared pool was when the runtime last
// pinned it, and gets the pool as it is now; one whose exclusive part is
// not where it runs needs a repin, which gives it both parts again.
func TestReadmitWithShared(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopShared)
	rec := Assignment{ID: "dpdk", Pod: PodRef{UID: "u1"}, Container: "c", Pool: pools.Exclusive, CPUs: set(t, "6,14"),
		WithShared: true, Shared: set(t, "2-3,9-11")}
	res, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "2-3,6,9-11,14")})
	require.NoError(t, err)
	assert.Equal(t, Kept, outcome)
	assert.Equal(t, "2-3,6,10-11,14", res.Assignment.Cpuset().String(), "the shared pool as it is now")

	b := newAllocator(t, "desktop-8c16t", desktopShared)
	_, outcome, _ = b.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "0-15")})
	require.Equal(t, NeedsRepin, outcome)
	res, outcome, err = b.Repin(Remembered{Assignment: rec, RunsOn: set(t, "0-15")})
	require.NoError(t, err)
	assert.Equal(t, Repinned, outcome)
	assert.Equal(t, "2-3,6,10-11,14", res.Assignment.Cpuset().String())
}

// TestReadmitKeepsTheExclusivePartTheSharedPoolTook (issue 30, defect 4):
// a config change hands a shared-cpus container's exclusive CPUs to the
// shared pool. Like a plain exclusive container, it is kept where it runs,
// and told; its exclusive part stays its own, out of the shared part of
// every container, its own included.
func TestReadmitKeepsTheExclusivePartTheSharedPoolTook(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedTookCore4)
	rec := withShared(remembered(t, "dpdk", "4,12", ""), set(t, "2-3,10-11"))
	res, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "2-4,10-12")})
	assert.ErrorContains(t, err, "container dpdk: CPUs 4,12 are outside pool exclusive (5-7,13-15) as now configured")
	require.Equal(t, Kept, outcome, "not placed again")
	assert.Equal(t, "4,12", res.Assignment.CPUs.String(), "the exclusive part never moves")
	assert.Equal(t, "2-3,10-11", res.Assignment.Shared.String(), "its own CPUs are not its shared part")
	_, err = a.restore(Assignment{ID: "member", Pod: PodRef{UID: "u2"}, Container: "c", Pool: pools.Shared, CPUs: set(t, "2-3,10-11")})
	require.NoError(t, err)
	assert.Empty(t, a.FollowShared(), "nothing to follow: the shared pool is 2-3,10-11 while it holds 4,12")
	member, _ := a.Get("member")
	assert.Equal(t, "2-3,10-11", member.CPUs.String(), "no shared member runs on its poll CPUs")
	assert.Equal(t, "2-3,10-11", a.PoolCPUs(pools.Shared).String())
}

// TestPolicyPartitionWithShared (issue 30, defect 3): the kernel runs an
// isolated partition's threads only on its exclusive CPUs, so a container
// cannot be both one and on the shared pool. Asking for both is refused,
// naming both annotations and how to choose; a partition that is only the
// pool's default (optOut) yields to the shared pool the container asked
// for, and the request says so.
func TestPolicyPartitionWithShared(t *testing.T) {
	const (
		part   = "isolated-partition.cpupool.dev"
		shared = "shared-cpus.cpupool.dev"
	)
	optOut := strings.Replace(desktopShared, `exclusive: {cpus: "4-7,12-15"}`, `exclusive: {cpus: "4-7,12-15", isolatedPartition: optOut}`, 1)
	optIn := strings.Replace(desktopShared, `exclusive: {cpus: "4-7,12-15"}`, `exclusive: {cpus: "4-7,12-15", isolatedPartition: optIn}`, 1)
	require.NotEqual(t, desktopShared, optOut)
	for _, tc := range []struct {
		name, config          string
		ann                   map[string]string
		partition, withShared bool
		skipped               bool
		err                   string
	}{
		{"optOut, shared asked: no partition, and told", optOut, map[string]string{shared: "true"}, false, true, true, ""},
		{"optOut, not shared: the partition", optOut, nil, true, false, false, ""},
		{"optOut, partition declined: nothing skipped", optOut, map[string]string{shared: "true", part: "false"}, false, true, false, ""},
		{"optOut, both asked: refused", optOut, map[string]string{shared + "/container.c": "true", part: "true"},
			false, false, false, `annotation isolated-partition.cpupool.dev="true": the kernel runs an isolated partition's threads only on its exclusive CPUs, so the container would lose the shared pool that shared-cpus.cpupool.dev/container.c="true" adds to them; choose one: remove one of the two annotations, or set isolated-partition.cpupool.dev/container.c: "false"`},
		{"optIn, both asked: refused", optIn, map[string]string{shared: "true", part + "/pod": "true"},
			false, false, false, `annotation isolated-partition.cpupool.dev/pod="true": the kernel runs an isolated partition's threads only on its exclusive CPUs, so the container would lose the shared pool that shared-cpus.cpupool.dev="true" adds`},
		{"optIn, the pod asks, the container declines", optIn, map[string]string{shared: "true", part: "true", part + "/container.c": "false"}, false, true, false, ""},
		{"optIn, shared asked: nothing skipped", optIn, map[string]string{shared: "true"}, false, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(parseConfig(t, tc.config), nil)
			ann := map[string]string{"pool.cpupool.dev": pools.Exclusive}
			maps.Copy(ann, tc.ann)
			req, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000, Annotations: ann}, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Equal(t, ReasonAnnotation, ReasonOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.partition, req.IsolatedPartition, "partition")
			assert.Equal(t, tc.withShared, req.WithShared, "shared")
			assert.Equal(t, tc.skipped, req.PartitionSkipped, "skipped")
		})
	}
}
