package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHugePageRefusalNamesTheContainer (review 59d): refuse() now
// logs a placement refusal as "refused: <err>", trusting the error to name
// the container. A malformed hugepage limit is refused as placement with
// demandOf's error, which names none: the log line says which page size
// is wrong but not whose (it said "refusing container X" before fx59b),
// and it is logged at error though it is the pod's own input.
func TestHugePageRefusalNamesTheContainer(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	f.mu.Lock()
	f.dress = func(ctr *api.Container) {
		ctr.Linux.Resources.HugepageLimits = []*api.HugepageLimit{{PageSize: "3MB", Limit: 3 << 20}}
	}
	f.mu.Unlock()
	_, _, err := f.createContainer(exclusivePod(f, "dpdk"), "fwd", 1000)
	require.ErrorContains(t, err, `hugepage size "3MB"`)
	t.Logf("error: %v", err)
	t.Logf("log: %s", rp.log.String())
	assert.Contains(t, rp.log.String(), "dpdk/fwd", "the refusal's log line names the container")
	// The runtime's error ("nri-cpupool: hugepage size ...") did not name
	// it before fx59b either; not asserted here.
}
