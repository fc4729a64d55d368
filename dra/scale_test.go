package dra

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// The big and sparse shapes (issue 33): on each, the slices describe the
// pools exactly in both models, split at 128 devices without losing or
// repeating one (a 1,024-CPU node in the cpu model takes 8 slices).
var bigSliceCases = []struct{ name, fixture, config string }{
	{"Granite Rapids SNC3: 6 NUMA nodes", "xeon-2s-gnr-snc3", `isolatedCPUs: "4-239,244-479"`},
	{"Turin dense NPS4: 8 NUMA nodes, 760 slots", "epyc-2s-turin-nps4", `
isolatedCPUs: "4-383,388-767"
pools: {exclusive-non-isolcpus: {enabled: true}}
`},
	{"1,024 CPUs", "epyc-2s-1024", `isolatedCPUs: "1-511,513-1023"`},
	{"sparse ids to 4,095, offline CPUs inside cores", "sparse-4096", `
isolatedCPUs: "2-47,1024-1029,1031-1055,2032-2047,2051-2095,3072-3077,3079-3103,4080-4094"
`},
}

func TestSlicesOfTheBigShapes(t *testing.T) {
	for _, tc := range bigSliceCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, model := range Models() {
				t.Run(model, func(t *testing.T) { checkSlices(t, static(t, tc.fixture, tc.config), model) })
			}
		})
	}
}

// TestPrepareAboveCPU1023: a claim on the sparse node's socket 1 gets CPUs
// at and above 1024 (up to 4094), the claims file keeps them through a
// restart, and the offline CPUs are never handed out.
func TestPrepareAboveCPU1023(t *testing.T) {
	s := static(t, "sparse-4096", bigSliceCases[3].config)
	td := newTestDriver(t, s)
	topo, _ := s.Layout()
	// A share of the node's device (numaNode model): in the cpu model a
	// claim gets at most 32 CPUs (TestClaimLimitOfTheCPUModel).
	res := prepare(t, td.Driver, shareClaim("uid-1", "big", pools.Exclusive, 1, 93, "pod-1"))
	require.NoError(t, res["uid-1"].Err)
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	require.Equal(t, 93, cpus.Size(), "every online CPU of node 1 (96 less 3 offline)")
	assert.True(t, cpus.IsSubsetOf(mustNode(t, topo, 1)))
	assert.True(t, cpus.Contains(4094) && cpus.Contains(2047) && cpus.Contains(1024), "ids at the top and across 1024: %s", cpus)
	assert.True(t, cpus.Intersection(topo.Offline).IsEmpty(), "offline CPUs %s are never handed out", topo.Offline)

	data, err := os.ReadFile(td.claims)
	require.NoError(t, err)
	assert.Contains(t, string(data), cpus.String(), "the claims file lists them in full")
	again := td.restart(t)
	assert.Equal(t, cpus.String(), cpusOf(t, again, "uid-1", "cpus").String(), "read back after a restart")
}
