package allocator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutsidePoolWording: a container kept outside its pool is named by
// its short id, as status shows it, not the runtime's 64 characters; and
// a pool with no CPUs is said to have none, not "()" (review 59b, L2: the
// CPUPoolReloadBlocked Event and the reload's log carry this text).
func TestOutsidePoolWording(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `reservedCPUs: "0,8"`)
	require.True(t, a.layout.Pool("exclusive").IsEmpty(), "no isolated CPUs: the exclusive pool is empty")
	id := strings.Repeat("8d1f5e0c", 8)
	_, _, err := a.Readmit(Remembered{Assignment: remembered(t, id, "4,12", ""), RunsOn: set(t, "4,12")})
	require.Error(t, err)
	assert.Equal(t, "container 8d1f5e0c8d1f: CPUs 4,12 are outside pool exclusive, which has no CPUs as now configured", err.Error())

	b := newAllocator(t, "desktop-8c16t", shrunk)
	_, _, err = b.Readmit(Remembered{Assignment: remembered(t, id, "4", ""), RunsOn: set(t, "4")})
	require.Error(t, err)
	assert.Equal(t, "container 8d1f5e0c8d1f: CPU 4 is outside pool exclusive (6-7,14-15) as now configured", err.Error())
	assert.Equal(t, "abc", ShortID("abc"))
}
