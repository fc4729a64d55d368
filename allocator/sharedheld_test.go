package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// sharedMovedTo4 is desktopShared after a restart with another config: the
// old shared CPUs (2-3,10-11) are now the exclusive pool's, the shared pool
// is core 4 (4,12).
const sharedMovedTo4 = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
`

// TestSharedPartNeverOnAnotherContainersExclusiveCPUs: after a restart
// with another config, an exclusive container kept where it runs holds the
// whole new shared pool (4,12), so PoolCPUs(shared) is empty. A remembered
// shared-cpus container kept its old shared part (2-3,10-11), which the new
// config gives to the exclusive pool, and FollowShared skipped an empty
// pool: the next exclusive container was given those CPUs while the
// shared-cpus container's control threads still ran on them. Its shared
// part runs on infra now, as while every shared CPU is offline.
func TestSharedPartNeverOnAnotherContainersExclusiveCPUs(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	rec := withShared(remembered(t, "dpdk", "6,14", ""), set(t, "2-3,10-11"))
	res, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "2-3,6,10-11,14")})
	require.Equal(t, Kept, outcome)
	assert.ErrorContains(t, err, "container dpdk: every CPU of pool shared (4,12) is held by an exclusive container (one kept where it runs after a config change); its shared part runs on pool infra (0-1,8-9) until one is free", "the restart logs it")
	a.FollowShared()
	dpdk, _ := a.Get("dpdk")
	t.Logf("shared pool now %q; dpdk cpuset %s (readmit said %s)", a.PoolCPUs("shared").String(), dpdk.Cpuset(), res.Assignment.Cpuset())
	next, err := a.Allocate(exclusive("next", 6))
	require.NoError(t, err)
	assert.True(t, next.Assignment.CPUs.Intersection(dpdk.Cpuset()).IsEmpty(),
		"exclusive container got %s, which overlaps the shared-cpus container's cpuset %s", next.Assignment.CPUs, dpdk.Cpuset())
}

// TestSharedMemberNeverOnAnotherContainersExclusiveCPUs: the same restart
// for a plain shared member, which readd left on its old CPUs ("pool
// shared has no CPUs as now configured; it stays on ..."), which the
// exclusive pool then handed out.
func TestSharedMemberNeverOnAnotherContainersExclusiveCPUs(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	_, err := a.restore(Assignment{ID: "member", Pod: PodRef{UID: "u2"}, Container: "c", Pool: "shared", CPUs: set(t, "2-3,10-11")})
	t.Logf("restore: %v", err)
	a.FollowShared()
	member, _ := a.Get("member")
	next, err := a.Allocate(exclusive("next", 6))
	require.NoError(t, err)
	assert.True(t, next.Assignment.CPUs.Intersection(member.CPUs).IsEmpty(),
		"exclusive container got %s, which overlaps shared member's cpuset %s", next.Assignment.CPUs, member.CPUs)
}

// TestSharedUsersLeaveAPoolHeldAfterThemAndComeBack: the restart's order
// does not matter: a member and a shared-cpus container readmitted before
// the container that holds the whole new shared pool get the pool as it
// was then, and leave it for infra as that container is kept (as infra's
// members follow infra), not only at FollowShared. New ones meanwhile run
// on infra too, as while the pool is offline, rather than being refused.
// When the container that holds the pool ends, they all go back to it.
func TestSharedUsersLeaveAPoolHeldAfterThemAndComeBack(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, err := a.restore(Assignment{ID: "member", Pod: PodRef{UID: "u2"}, Container: "c", Pool: "shared", CPUs: set(t, "2-3,10-11")})
	require.NoError(t, err)
	rec := withShared(remembered(t, "dpdk", "6,14", ""), set(t, "2-3,10-11"))
	_, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "2-3,6,10-11,14")})
	require.NoError(t, err)
	require.Equal(t, Kept, outcome)
	dpdk, _ := a.Get("dpdk")
	require.Equal(t, "4,6,12,14", dpdk.Cpuset().String(), "the shared pool as it is now")

	res, outcome, err := a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	require.Equal(t, Kept, outcome)
	require.Error(t, err, "outside its pool as now configured: kept anyway")
	assert.Len(t, res.Updates, 2, "both leave the CPUs it holds at once")
	member, _ := a.Get("member")
	dpdk, _ = a.Get("dpdk")
	assert.Equal(t, "0-1,8-9", member.CPUs.String(), "on infra while every shared CPU is held")
	assert.Equal(t, "0-1,6,8-9,14", dpdk.Cpuset().String())
	assert.Empty(t, a.FollowShared())

	m2, err := a.Allocate(shared("member2"))
	require.NoError(t, err, "a new member runs where the others do")
	assert.Equal(t, "0-1,8-9", m2.Assignment.CPUs.String())
	d2, err := a.Allocate(mixed("dpdk2", 2))
	require.NoError(t, err)
	assert.Equal(t, "0-1,8-9", d2.Assignment.Shared.String())
	next, err := a.Allocate(exclusive("next", 4))
	require.NoError(t, err)
	for _, id := range []string{"member", "dpdk", "member2", "dpdk2"} {
		c, _ := a.Get(id)
		want := c.Cpuset()
		if c.WithShared {
			want = c.Shared
		}
		assert.True(t, next.Assignment.CPUs.Intersection(want).IsEmpty(), "%s on %s, next on %s", id, want, next.Assignment.CPUs)
	}

	rel := a.Release("old")
	assert.Len(t, rel.Updates, 4, "every shared user goes back to the pool")
	for _, id := range []string{"member", "member2"} {
		c, _ := a.Get(id)
		assert.Equal(t, "4,12", c.CPUs.String(), id)
	}
	for _, id := range []string{"dpdk", "dpdk2"} {
		c, _ := a.Get(id)
		assert.Equal(t, "4,12", c.Shared.String(), id)
	}
}

// TestSharedUsersNeverOnACPUInfraLendsAfterTheHolderEnds: while the
// restart's kept container holds the whole shared pool, its users run on
// infra and follow it (a CPU lent to exclusive-non-isolcpus leaves them);
// once that container ends they go back to the pool, and a CPU infra lends
// next is never one they still run on.
func TestSharedUsersNeverOnACPUInfraLendsAfterTheHolderEnds(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4+"  exclusive-non-isolcpus: {enabled: true}\n")
	_, _, _ = a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	_, note, err := a.restoreNoted(Assignment{ID: "member", Pod: PodRef{UID: "u2"}, Container: "c", Pool: "shared", CPUs: set(t, "2-3,10-11")})
	require.NoError(t, err, "added")
	require.EqualError(t, note, "container member: every CPU of pool shared (4,12) is held by an exclusive container (one kept where it runs after a config change); it runs on pool infra (0-1,8-9) until one is free",
		"on infra while the pool is held, and told")
	a.FollowShared()
	member, _ := a.Get("member")
	require.Equal(t, "0-1,8-9", member.CPUs.String())

	lend := func(id string) cpuset.CPUSet {
		y := exclusive(id, 1)
		y.Pool = pools.ExclusiveNonIsolcpus
		res, err := a.Allocate(y)
		require.NoError(t, err)
		return res.Assignment.CPUs
	}
	first := lend("y1")
	member, _ = a.Get("member")
	assert.True(t, member.CPUs.Intersection(first).IsEmpty(), "infra lent %s: the member leaves it (%s)", first, member.CPUs)

	a.Release("old")
	member, _ = a.Get("member")
	assert.Equal(t, "4,12", member.CPUs.String(), "back on its pool once it is free")
	second := lend("y2")
	member, _ = a.Get("member")
	assert.True(t, member.CPUs.Intersection(second).IsEmpty(), "infra lent %s while the member runs on %s", second, member.CPUs)
}

// TestStaleRecordSharedPartOnInfraKeepsTheExclusivePart: restart #1 with
// sharedMovedTo4 keeps "dpdk" on 4,12 (exclusive under the old config; the
// whole shared pool under the new one) and moves its shared part to infra
// (0-1,8-9); the runtime applies it, and the plugin is killed (-9) before
// the background state write. Restart #2 with the same config: the record
// still says shared part 2-3,10-11, the runtime runs it on 0-1,4,8-9,12.
// The infra CPUs beside its exclusive part are its shared part, not a move:
// it is kept on 4,12, never placed anew.
func TestStaleRecordSharedPartOnInfraKeepsTheExclusivePart(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	rec := withShared(remembered(t, "dpdk", "4,12", ""), set(t, "2-3,10-11"))
	_, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "2-4,10-12")})
	require.Equal(t, Kept, outcome, "restart #1: %v", err)
	d, _ := a.Get("dpdk")
	require.Equal(t, "0-1,4,8-9,12", d.Cpuset().String(), "restart #1 put its shared part on infra")

	// Restart #2, same config, stale record (kill -9 before the state write).
	b := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, outcome, err = b.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "0-1,4,8-9,12")})
	assert.Equal(t, Kept, outcome, "the exclusive part 4,12 runs there; a plain restart keeps it (%v)", err)
	d, _ = b.Get("dpdk")
	assert.Equal(t, "4,12", d.CPUs.String())
	assert.Equal(t, "0-1,4,8-9,12", d.Cpuset().String())

	// A container the allocator has no record of (the state file lost),
	// running on 6,14 with its shared part on infra while another kept
	// container holds the whole shared pool, stays where it runs too.
	c := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = c.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	_, adopted, err := c.Adopt(mixed("dpdk", 2), set(t, "0-1,6,8-9,14"), cpuset.New())
	assert.Equal(t, StaysWhereItRuns, adopted, "%v", err)
	d, _ = c.Get("dpdk")
	assert.Equal(t, "6,14", d.CPUs.String())
}

// TestRestoreWithSharedPartOnInfraSaysAdded: restore returned readd's
// "its shared part runs on infra" note as an error after the assignment
// was committed. Readmit and Repin read any error as "nothing was added"
// (NeedsRepin, NeedsPlacement), yet the container was in the allocator,
// owning its CPUs: the caller placed it a second time.
func TestRestoreWithSharedPartOnInfraSaysAdded(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	rec := withShared(remembered(t, "dpdk", "6,14", ""), set(t, "2-3,10-11"))
	_, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "7,15")})
	assert.Equal(t, KeptWhereItRuns, outcome, "%v", err)
	d, added := a.Get("dpdk")
	require.True(t, added)
	assert.Equal(t, "0-1,7-9,15", d.Cpuset().String())

	// Not pinned at all: Readmit finds NeedsRepin, Repin puts it back.
	b := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = b.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	_, outcome, err = b.Readmit(Remembered{Assignment: rec, RunsOn: cpuset.New()})
	require.Equal(t, NeedsRepin, outcome, "%v", err)
	_, outcome, err = b.Repin(Remembered{Assignment: rec, RunsOn: cpuset.New()})
	assert.Equal(t, Repinned, outcome, "%v", err)
	d, added = b.Get("dpdk")
	require.True(t, added)
	assert.Equal(t, "0-1,6,8-9,14", d.Cpuset().String())
}
