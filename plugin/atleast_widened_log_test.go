package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

// TestAQuotaLiftedContainerOnASetNoGrowMadeIsPinnedBack's "moved off 20 of
// its CPUs and widened" case passes whether or not the set is judged no
// grow (allocator.AtLeastNoGrow's !rec.CPUs.IsSubsetOf(part)): ReadmitResized's
// count check refuses it either way and it is pinned back. What the clause
// keeps out is the log of a resize to the bound for a container no resize
// touched; this asserts that.
func TestAQuotaLiftedContainerMovedAndWidenedIsNotLoggedAsAResizeTo256CPUs(t *testing.T) {
	f, first, g := admitQuotaLifted(t)
	rec := f.cpus(g)
	first.kill()
	f.setCPUs(g, cpuset.New(mustParse(rec).List()[20:]...).Union(mustParse("158-191,350-383")).String()) // 348 CPUs

	second := startPlugin(t, f, quotaLiftedEpyc, statePath(f))
	assert.Equal(t, rec, f.cpus(g), "pinned back")
	log := second.log.String()
	assert.NotContains(t, log, "resize to 256000m", "no resize happened")
	assert.NotContains(t, log, "with a request of 256000m", "the bound is no request")
	assert.Contains(t, log, "not on its CPUs "+rec+"; pinned again")
}
