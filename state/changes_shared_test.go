package state

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrackedStateSavedByTwoEncoders: a tracked State saved by two stores
// (Save takes any State: a second file, a copy for a backup) is what
// encoding/json writes in both. Each encode forgets the State's changes,
// so the other encoder, which last encoded this very State too, must not
// take the empty list for "nothing changed since my encode".
func TestTrackedStateSavedByTwoEncoders(t *testing.T) {
	st := NewState()
	st.TrackContainerChanges()
	st.SetContainer("a", ContainerState{Pool: "infra", CPUs: "0-3"})
	st.SetContainer("b", ContainerState{Pool: "infra", CPUs: "0-3"})
	var first, second stateEncoder
	for _, enc := range []*stateEncoder{&first, &second, &first, &second} {
		_, err := enc.encode(st)
		require.NoError(t, err)
	}
	st.SetContainer("a", ContainerState{Pool: "exclusive", CPUs: "4"})
	st.DeleteContainer("b")
	_, err := second.encode(st)
	require.NoError(t, err)
	got, err := first.encode(st)
	require.NoError(t, err)
	want, err := json.Marshal(st)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "the first store missed the changes the second one's encode took")
}
