package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// The shared part of a with-shared container that ran on infra (readd,
// while the shared pool was fully held) is no move at a restart, whatever
// the record knows of it; the CPUs an exclusive-non-isolcpus container's
// lost grow took from infra are its exclusive part, not its shared part.

// Restart #1 keeps "dpdk" where it runs (7,15, not its record's 6,14) and,
// since "old" holds the whole shared pool (4,12), sends its shared part to
// infra (0-1,8-9); the runtime applies 0-1,7-9,15 and the plugin is killed
// before the state write. Restart #2, same config, stale record (6,14,
// shared 2-3,10-11): the record's exclusive part is not where it runs, and
// a rule that needed it there repinned the running container onto 6,14.
func TestReadmitKeptWhereItRunsThenKill9KeepsTheExclusivePart(t *testing.T) {
	rec := withShared(remembered(t, "dpdk", "6,14", ""), set(t, "2-3,10-11"))
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	_, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "2-3,7,10-11,15")})
	require.Equal(t, KeptWhereItRuns, outcome, "restart #1: %v", err)
	d, _ := a.Get("dpdk")
	require.Equal(t, "0-1,7-9,15", d.Cpuset().String(), "restart #1 put its shared part on infra")

	b := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, _, _ = b.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	_, outcome, err = b.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "0-1,7-9,15")})
	if outcome == NeedsRepin {
		_, outcome, err = b.Repin(Remembered{Assignment: rec, RunsOn: set(t, "0-1,7-9,15")})
	}
	d, _ = b.Get("dpdk")
	t.Logf("restart #2: %s (%v): dpdk on %s", outcome, err, d.Cpuset())
	assert.Equal(t, KeptWhereItRuns, outcome)
	assert.Equal(t, "7,15", d.CPUs.String(), "a plain restart moved a running exclusive container")
}

// As above, but "old" ended while the plugin was down: the shared pool is
// free again at restart #2, and the infra CPUs beside the exclusive part
// are still the shared part the last run gave it, not CPUs it asked for.
// It keeps its exclusive part and gets the shared pool back.
func TestReadmitSharedPartLeftOnInfraOnceThePoolIsFreeKeepsTheExclusivePart(t *testing.T) {
	rec := withShared(remembered(t, "dpdk", "6,14", ""), set(t, "2-3,10-11"))
	b := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	_, outcome, err := b.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "0-1,7-9,15")})
	require.Equal(t, KeptWhereItRuns, outcome, "%v", err)
	d, _ := b.Get("dpdk")
	assert.Equal(t, "7,15", d.CPUs.String(), "a restart moved a running exclusive container")
	assert.Equal(t, "4,7,12,15", d.Cpuset().String(), "its shared part is the shared pool again")
}

// Adopt (no record) reads it the same way: the infra CPUs beside what it
// runs on are its shared part, and it stays on its exclusive part.
func TestAdoptSharedPartLeftOnInfraOnceThePoolIsFreeStaysWhereItRuns(t *testing.T) {
	b := newAllocator(t, "desktop-8c16t", sharedMovedTo4)
	res, how, err := b.Adopt(mixed("dpdk", 2), set(t, "0-1,7-9,15"), cpuset.New())
	require.NoError(t, err)
	assert.Equal(t, StaysWhereItRuns, how)
	assert.Equal(t, "4,7,12,15", res.Assignment.Cpuset().String())
}

const eniWithShared = `isolatedCPUs: "4-7,12-15"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "3,11"}
  exclusive-non-isolcpus: {enabled: true}
`

// An exclusive-non-isolcpus shared-cpus container's exclusive CPUs are
// lent from infra. A live grow whose record a kill -9 lost adds infra CPUs
// beside the record's; read as "its shared part on infra" they kept it on
// the record's set, and the CPUs the grow gave it went back to infra.
// With a free shared pool they are its exclusive part: NeedsRepin, which
// ReadmitResized then keeps where it runs.
func TestReadmitENILostGrowIsNotReadAsItsSharedPart(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", eniWithShared)
	req := mixed("eni", 1)
	req.Pool = pools.ExclusiveNonIsolcpus
	res, err := a.Allocate(req)
	require.NoError(t, err)
	rec := res.Assignment
	grow := req
	grow.MilliCPU = 2000
	res, err = a.Resize(grow)
	require.NoError(t, err)
	grown := res.Assignment
	require.Equal(t, 2, grown.CPUs.Size())

	b := newAllocator(t, "desktop-8c16t", eniWithShared)
	_, outcome, err := b.Readmit(Remembered{Assignment: rec, RunsOn: grown.Cpuset()})
	t.Logf("record %s, grown %s: %s (%v)", rec.Cpuset(), grown.Cpuset(), outcome, err)
	assert.Equal(t, NeedsRepin, outcome, "the lost grow's CPU %s read as its shared part", grown.CPUs.Difference(rec.CPUs))
}
