package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On a node booted with nosmt (smt/control off) the layout is carved on
// the online CPUs (presentTopology returns topo), so Layout.carved has no
// offline CPU at all. A listed exclusive CPU the kernel took offline joins
// exclusive again when it comes online (HotplugLayout): Repin holds it
// for the container, and Readmit keeps it without a false "not in pool"
// error. Nothing says it is another pool's.
func TestRepinOnANosmtNodeHoldsAnOfflineCPUItsPoolStillHas(t *testing.T) {
	const cfgYAML = `isolatedCPUs: "2-15"
reservedCPUs: "0"
pools:
  exclusive: {cpus: "4-7"}
  shared: {cpus: "2-3"}
`
	topo := topology(t, "xeon-1s-nosmt")
	require.True(t, topo.SMTDisabled())
	off := withOffline(topo, 5)
	layout, problems := BuildLayoutRunning(off, parseConfig(t, cfgYAML))
	require.False(t, problems.HasErrors(), "%v", problems)

	back, _ := HotplugLayout(layout, topo, parseConfig(t, cfgYAML))
	require.True(t, back.Exclusive.Contains(5), "CPU 5 rejoins exclusive once online (%s)", back.Exclusive)

	b := New(off, layout, false)
	res, outcome, err := b.Repin(Remembered{Assignment: remembered(t, "x", "4-5", ""), RunsOn: set(t, "9")})
	t.Logf("outcome %v cpus %s err %v", outcome, res.Assignment.CPUs, err)
	assert.Equal(t, Repinned, outcome, "CPU 5 is pool exclusive's as configured (listed), offline only: %v", err)

	c := New(off, layout, false)
	_, outcome, err = c.Readmit(Remembered{Assignment: remembered(t, "y", "4-5", ""), RunsOn: set(t, "4")})
	assert.Equal(t, Kept, outcome)
	assert.NoError(t, err, "a kept container is told its listed exclusive CPU is not in its pool")
}
