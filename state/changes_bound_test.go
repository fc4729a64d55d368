package state

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrackedChangesStayBounded: a tracked State whose store never encodes
// it (a store that keeps nothing, as the benchmarks' in-memory one) keeps
// no more of its changes than it has containers: past that, comparing
// every container costs no more than visiting the changes, and the list
// of every ID ever created would grow for the process's life.
func TestTrackedChangesStayBounded(t *testing.T) {
	st := NewState()
	st.TrackContainerChanges()
	var enc stateEncoder
	_, err := enc.encode(st)
	require.NoError(t, err)
	for i := range 10000 {
		id := fmt.Sprint("c", i)
		st.SetContainer(id, ContainerState{Pool: "infra"})
		st.DeleteContainer(id)
	}
	require.LessOrEqual(t, len(st.changed.keys), 1, "the changes of 10,000 containers created and removed, none left")
	st.SetContainer("kept", ContainerState{Pool: "infra", CPUs: "1"})
	got, err := enc.encode(st)
	require.NoError(t, err)
	want, err := json.Marshal(st)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
