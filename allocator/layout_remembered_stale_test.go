package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// A stale remembered L3 list of one absent CPU (64, really in L3 0-7,64-71)
// must not change where an exclusive container is placed on the present
// CPUs: the kernel says 6-7,70-71 and 8-11,72-75 are two L3s; a 6-CPU
// container fits one L3 (8-10,72-74) and must be placed there.
func TestStaleRememberedL3DoesNotSplitAnExclusiveContainerAcrossL3s(t *testing.T) {
	full := topology(t, "epyc-1s-nps4")
	cfg := parseConfig(t, "isolatedCPUs: \"6-11,70-75\"\npools: {exclusive: {cpus: \"6-11,70-75\"}}\n")
	rec, _ := full.Remember(sysfs.Remembered{})
	place := func(r sysfs.Remembered) string {
		topo := unplugged(full, 64).WithRemembered(r)
		l, p := BuildLayoutRunning(topo, cfg)
		require.False(t, p.HasErrors(), "%v", p)
		res, err := New(topo, l, cfg.PinMemory).Allocate(exclusive("a", 6))
		require.NoError(t, err)
		return res.Assignment.CPUs.String()
	}
	good := place(rec)
	bad := sysfs.Remembered{Version: rec.Version}
	for _, c := range rec.CPUs {
		if c.ID == 64 {
			c.L3CPUs = "0-15,64-79"
		}
		bad.CPUs = append(bad.CPUs, c)
	}
	assert.Equal(t, good, place(bad), "a stale record's L3 list for absent CPU 64 moved an exclusive container across L3s")
}

// A hot-removed CPU whose siblings entry is right (72: 8,72) joins its
// present core, but whose L3 entry names no present CPU (stale: "72") is
// was put in an L3 group of its own: the core 8,72 then spanned two L3
// groups, and the carving of the PRESENT CPUs changed (8 left the
// exclusive pool for infra, 10 and 74 took its place) only because of
// that stale entry. It takes its core's L3 group: the carving is the full
// node's, as with the right entry.
func TestStaleL3EntryOfARemovedThreadDoesNotMovePresentCPUs(t *testing.T) {
	full := topology(t, "epyc-1s-nps4")
	cfg := parseConfig(t, "isolatedCPUs: \"4-63,68-127\"\nreservedCPUs: \"0,64\"\npools: {exclusive: {count: 60}, shared: {count: 30}}\n")
	rec, _ := full.Remember(sysfs.Remembered{})
	carve := func(r sysfs.Remembered) *Layout {
		topo := unplugged(full, 72).WithRemembered(r)
		l, p := BuildLayoutRunning(topo, cfg)
		require.False(t, p.HasErrors(), "%v", p)
		return l
	}
	fl, p := BuildLayoutRunning(full, cfg)
	require.False(t, p.HasErrors(), "%v", p)
	// The layout's sets hold present CPUs: compare without 72.
	gone := cpuset.New(72)
	good := carve(rec)
	require.Equal(t, fl.Exclusive.Difference(gone).String(), good.Exclusive.String(), "the right record carves as the full node")
	stale := sysfs.Remembered{Version: rec.Version}
	for _, c := range rec.CPUs {
		if c.ID == 72 {
			c.L3CPUs = "72"
		}
		stale.CPUs = append(stale.CPUs, c)
	}
	bad := carve(stale)
	assert.Equal(t, fl.Exclusive.Difference(gone).String(), bad.Exclusive.String(), "a stale L3 entry of absent CPU 72 moved present CPUs between pools")
	assert.Equal(t, fl.Infra.Difference(gone).String(), bad.Infra.String(), "infra")
}
