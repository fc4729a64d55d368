package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
