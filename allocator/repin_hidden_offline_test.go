package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

// A hide-hyperthreads container whose every running CPU is offline, only
// its hidden (idle) siblings online, has nothing to be pinned back on:
// Repin must refuse it as it refuses a record with no CPU online. Its
// hidden siblings are no CPUs it runs on, yet they make Held() differ from
// the offline set, so it could be "Repinned" with a cpuset of offline CPUs only
// (the update cgroup v1 refuses, sent with IgnoreFailure: it silently
// stays where the kernel moved it), and its online siblings held idle.
func TestRepinRefusesAHiddenSiblingsRecordWhoseRunningCPUsAreAllOffline(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	off := withOffline(a.Topology(), 4, 5)
	b, _ := a.Rebase(off, mustHotplug(t, a, off, desktopPools))

	rec := remembered(t, "h", "4-5", "12-13")
	rec.HideHyperthreads = true
	res, outcome, err := b.Repin(Remembered{Assignment: rec, RunsOn: cpuset.New()})
	t.Logf("outcome %v, cpus %s reserved %s, err %v", outcome, res.Assignment.CPUs, res.Assignment.Reserved, err)
	assert.Equal(t, NeedsPlacement, outcome, "Repinned on %s, none of them online: the update can pin it nowhere", res.Assignment.Cpuset())
	assert.ErrorContains(t, err, "CPUs 4-5 are offline, every one it runs on")
}
