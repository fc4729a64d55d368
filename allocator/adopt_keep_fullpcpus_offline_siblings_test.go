package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// A full-pcpus-only container placed on the whole cores 5,13 and 6,14
// whose threads 13 and 14 went offline (cgroup v1 dropped them from its
// cpuset) is adopted at a restart that lost its record, on 5-6, asking for
// its 4 CPUs. partCore leaves offline threads out, so 5-6 read as whole
// cores: keepAndGrow keeps them and grows by a whole core. Nothing holds
// 13 and 14 for it: once online they are free exclusive CPUs, and the next
// container placed gets a thread of a core the full-pcpus-only container
// runs on. Placed anew (as before keepAndGrow kept full-pcpus-only ones)
// it was on whole online cores.
func TestAdoptKeepAndGrowFullPCPUsOnlyOnCoresWithOfflineSiblingsSharesNoCoreOnceOnline(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	off := withOffline(a.Topology(), 13, 14)
	b, _ := a.Rebase(off, mustHotplug(t, a, off, desktopPools))
	req := exclusive("a", 4)
	req.Options.FullPCPUsOnly = true
	res, how, err := b.Adopt(req, set(t, "5-6"), set(t, ""))
	require.NoError(t, err)
	t.Logf("adopted: %s %s", how, res.Assignment.CPUs)

	on := a.Topology()
	c, _ := b.Rebase(on, mustHotplug(t, b, on, desktopPools))
	mine, ok := c.Get("a")
	require.True(t, ok)
	for i := 0; i < 4; i++ {
		r, err := c.Allocate(exclusive("other"+string(rune('0'+i)), 1))
		if err != nil {
			break
		}
		for _, cpu := range r.Assignment.CPUs.List() {
			sib := cpu + 8
			if cpu >= 8 {
				sib = cpu - 8
			}
			assert.False(t, mine.CPUs.Contains(sib), "%s placed on CPU %d, a thread of a core full-pcpus-only container a runs on (%s)", r.Assignment.ID, cpu, mine.CPUs)
		}
	}
}

// An offline CPU whose core nothing remembers may be a thread of any core:
// a full-pcpus-only container is then not kept on cores that look whole,
// while one whose offline thread's core is known is kept on other whole
// cores.
func TestKeepAndGrowGuardCountsOfflineThreadsOfUnknownCore(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	known := withOffline(a.Topology(), 13)
	b, _ := a.Rebase(known, mustHotplug(t, a, known, desktopPools))
	assert.False(t, b.lacksAThread(set(t, "4,12")), "4,12 is a whole core; 13 is core 5's")
	assert.True(t, b.lacksAThread(set(t, "5")), "5's sibling 13 is offline, not in the set")

	unknown := withOffline(a.Topology(), 13)
	for i := range unknown.CPUs {
		if unknown.CPUs[i].ID == 13 {
			unknown.CPUs[i].Core = sysfs.Unknown
		}
	}
	c, _ := a.Rebase(unknown, mustHotplug(t, a, unknown, desktopPools))
	assert.True(t, c.lacksAThread(set(t, "4,12")), "13's core is unknown: it may be 4's")
}
