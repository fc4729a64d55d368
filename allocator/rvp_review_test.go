package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// rvP-1: restart #1 keeps "dpdk" where it runs (7,15, not its record's
// 6,14) and, since "old" holds the whole shared pool (4,12), sends its
// shared part to infra (0-1,8-9); the runtime applies 0-1,7-9,15 and the
// plugin is killed before the state write. Restart #2, same config, stale
// record (6,14, shared 2-3,10-11): fxN's rule needs the record's exclusive
// part inside what it runs on, so 0-1,7-9,15 reads as a 6-CPU set,
// NeedsRepin, and Repin moves the running exclusive container to 6,14.
func TestRvPKeptWhereItRunsThenKill9SharedPartOnInfra(t *testing.T) {
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
	assert.Equal(t, "7,15", d.CPUs.String(), "a plain restart moved a running exclusive container")
}

const rvpENI = `isolatedCPUs: "4-7,12-15"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "3,11"}
  exclusive-non-isolcpus: {enabled: true}
`

// rvP-2: an exclusive-non-isolcpus shared-cpus container's exclusive CPUs
// are lent from infra. A live grow (its record lost by kill -9) adds infra
// CPUs beside the record's; fxN's rule reads those as "its shared part on
// infra" and keeps it on the record's set: the lost grow is undone (its
// added CPUs go back to infra), not kept where it runs.
func TestRvPENILostGrowReadAsSharedPartOnInfra(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", rvpENI)
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
	t.Logf("record %s (cpuset %s); grown %s (cpuset %s)", rec.CPUs, rec.Cpuset(), grown.CPUs, grown.Cpuset())

	b := newAllocator(t, "desktop-8c16t", rvpENI)
	_, outcome, err := b.Readmit(Remembered{Assignment: rec, RunsOn: grown.Cpuset()})
	d, _ := b.Get("eni")
	t.Logf("restart: %s (%v): eni on %s (%dm)", outcome, err, d.CPUs, d.MilliCPU)
	assert.NotEqual(t, Kept, outcome, "the lost grow's CPU %s read as its shared part", grown.CPUs.Difference(rec.CPUs))
}
