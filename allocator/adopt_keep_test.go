package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A container adopted on fewer CPUs than it asks for keeps those it runs
// on that are free and its pool's, and gets the rest as a live grow does:
// placed anew it was moved off CPUs it may keep.
func TestAdoptKeepsTheFreeCPUsItRunsOnAndGrowsByTheRest(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	res, how, err := a.Adopt(exclusive("a", 4), set(t, "1-3"), set(t, ""))
	require.NoError(t, err)
	assert.Equal(t, PlacedAsNew, how, "its cpuset changes: the runtime must be told")
	assert.Equal(t, 4, res.Assignment.CPUs.Size())
	assert.True(t, set(t, "1-3").IsSubsetOf(res.Assignment.CPUs), "kept 1-3: %s", res.Assignment.CPUs)
	assert.Equal(t, int64(4000), res.Assignment.MilliCPU)
}

// A CPU it runs on that another container has is not kept: the set is not
// taken from anyone, and it is placed anew off the other's CPU.
func TestAdoptDoesNotKeepCPUsAnotherContainerHas(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	_, how, err := a.Adopt(exclusive("b", 1), set(t, "2"), set(t, ""))
	require.NoError(t, err)
	require.Equal(t, StaysWhereItRuns, how)
	res, how, err := a.Adopt(exclusive("a", 4), set(t, "1-3"), set(t, ""))
	require.NoError(t, err)
	assert.Equal(t, PlacedAsNew, how)
	assert.False(t, res.Assignment.CPUs.Contains(2), "b's CPU: %s", res.Assignment.CPUs)
	b, ok := a.Get("b")
	require.True(t, ok)
	assert.Equal(t, "2", b.CPUs.String(), "b keeps its CPU")
}

// When the pool cannot give it the rest, nothing of the kept part stays
// added: the adoption is refused as a new placement is, and the CPUs it
// runs on are free again.
func TestAdoptThatCannotGrowAddsNothing(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-3"}}`)
	_, _, err := a.Adopt(exclusive("a", 4), set(t, "1-2"), set(t, ""))
	require.Error(t, err)
	_, ok := a.Get("a")
	assert.False(t, ok, "nothing added")
	_, how, err := a.Adopt(exclusive("b", 3), set(t, "1-3"), set(t, ""))
	require.NoError(t, err, "1-3 are free again")
	assert.Equal(t, StaysWhereItRuns, how)
}

// Kept on 2 CPUs and grown to the 4 it asks for, it is placed by its
// request as a new container is: all 4 are the CPUs it was created with,
// which a resize never gives back (docs/pools.md). A shrink to 2 is
// refused, as for the container placed anew on 4; it is not taken for a
// container created on 2 and grown since.
func TestAdoptKeptAndGrownIsCreatedWithAllItsCPUs(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	res, _, err := a.Adopt(exclusive("a", 4), set(t, "1-2"), set(t, ""))
	require.NoError(t, err)
	require.Equal(t, 4, res.Assignment.CPUs.Size())
	assert.Equal(t, res.Assignment.CPUs.String(), res.Assignment.Original().String(), "all original")
	_, err = a.Resize(resize("a", 2))
	require.ErrorContains(t, err, "never gives back the 4 CPUs it was created with")
	got, ok := a.Get("a")
	require.True(t, ok)
	assert.Equal(t, res.Assignment.CPUs.String(), got.CPUs.String(), "it keeps its 4 CPUs")
}
