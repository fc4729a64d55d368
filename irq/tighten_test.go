package irq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestTightensOnlyWhenACPUIsBannedAnew: the reconciler starts a pass
// sooner than its spacing only for a CPU banned that the last plan did
// not ban (a new exclusive container's CPUs take device IRQs until it);
// a release or the same ban does not.
func TestTightensOnlyWhenACPUIsBannedAnew(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	assert.False(t, n.src.Tightens(), "nothing banned")
	n.src.SetBanned(cpuset.New(2, 3))
	assert.True(t, n.src.Tightens(), "2 and 3 banned anew")
	require.NoError(t, n.r.Flush())
	assert.False(t, n.src.Tightens(), "planned")
	n.src.SetBanned(cpuset.New(3))
	assert.False(t, n.src.Tightens(), "a release")
	require.NoError(t, n.r.Flush())
	n.src.SetBanned(cpuset.New(3, 5))
	assert.True(t, n.src.Tightens(), "5 banned anew")
}
