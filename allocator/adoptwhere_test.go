package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestAdoptWhereItRuns: a container the allocator has no record of is
// taken in only where it runs, when it may stay there; otherwise nothing
// is added (no placement anew: that waits until every remembered container
// is pinned).
func TestAdoptWhereItRuns(t *testing.T) {
	kubelet := exclusive("a", 2)
	kubelet.CPUs = set(t, "6,14")
	shared := Request{ID: "a", Pod: PodRef{UID: "uid-a"}, Container: "c", Pool: pools.Shared, NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()}
	tests := []struct {
		name    string
		req     Request
		current string
		stays   bool
	}{
		{name: "on a free set of its size: stays", req: exclusive("a", 2), current: "4,12", stays: true},
		{name: "on the kubelet's allocation: stays", req: kubelet, current: "6,14", stays: true},
		{name: "not on the kubelet's allocation", req: kubelet, current: "4,12"},
		{name: "on a set of another size", req: exclusive("a", 2), current: "4-5,12-13"},
		{name: "on another container's CPUs", req: exclusive("a", 2), current: "5,13"},
		{name: "not pinned", req: exclusive("a", 2), current: ""},
		{name: "a shared member: adopted later", req: shared, current: "2-3,10-11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, "desktop-8c16t", desktopPools)
			_, outcome, err := a.Readmit(Remembered{Assignment: remembered(t, "b", "5,13", ""), RunsOn: set(t, "5,13")})
			require.NoError(t, err)
			require.Equal(t, Kept, outcome)
			current := cpuset.New()
			if tc.current != "" {
				current = set(t, tc.current)
			}
			res, ok := a.AdoptWhereItRuns(tc.req, current, cpuset.New())
			got, isIn := a.Get("a")
			assert.Equal(t, tc.stays, ok)
			assert.Equal(t, tc.stays, isIn, "added only if it stays")
			if tc.stays {
				assert.Equal(t, tc.current, got.CPUs.String())
				assert.Equal(t, tc.current, res.Assignment.CPUs.String())
			}
		})
	}
}
