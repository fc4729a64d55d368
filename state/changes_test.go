package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrackedEncodingMatchesJSONAtRandom: a State whose containers change
// through SetContainer, DeleteContainer and ReplaceContainers is encoded
// from what they touched, and is still what encoding/json writes, whatever
// the changes between two encodes (none, several to one key, a removal
// then a re-add, a key never cached removed, the whole map replaced, an
// encode of another State in between).
func TestTrackedEncodingMatchesJSONAtRandom(t *testing.T) {
	keys := []string{"a", "b", "é", "<&>", "z\"", "A", "\xff", "ab"}
	r := rand.New(rand.NewSource(45))
	var enc stateEncoder
	st := NewState()
	st.TrackContainerChanges()
	for step := 0; step < 3000; step++ {
		for n := r.Intn(4); n > 0; n-- {
			key := keys[r.Intn(len(keys))]
			switch r.Intn(10) {
			case 0, 1:
				st.DeleteContainer(key)
			case 2, 3, 4:
				st.SetContainer(key, randomContainer(r))
			case 5, 6, 7:
				c := st.Containers[key]
				changeOneField(r, &c, randomContainer(r))
				st.SetContainer(key, c)
			case 8:
				if r.Intn(10) == 0 {
					st.ReplaceContainers(maps.Clone(st.Containers))
				}
			default:
				if r.Intn(20) == 0 {
					other := NewState()
					other.Containers["x"] = randomContainer(r)
					_, err := enc.encode(other)
					require.NoError(t, err)
				}
			}
		}
		got, err := enc.encode(st)
		require.NoError(t, err)
		want, err := json.Marshal(st)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "step %d", step)
	}
}

// TestTrackedEncodingVisitsTheChangesOnly: once a State is tracked, an
// encode visits the containers its setters touched and no other (at 1,000
// running, comparing every container with its cached entry was a quarter
// of a state write's CPU). A container written into the map directly is
// therefore not seen, which is what TrackContainerChanges forbids; an
// untracked State is compared entry by entry and sees it.
func TestTrackedEncodingVisitsTheChangesOnly(t *testing.T) {
	for _, tracked := range []bool{true, false} {
		t.Run(fmt.Sprintf("tracked=%v", tracked), func(t *testing.T) {
			st := NewState()
			if tracked {
				st.TrackContainerChanges()
			}
			for i := range 1000 {
				st.SetContainer(fmt.Sprint("c", i), ContainerState{Pool: "infra", CPUs: "0-3"})
			}
			var enc stateEncoder
			_, err := enc.encode(st)
			require.NoError(t, err)
			st.SetContainer("c1", ContainerState{Pool: "exclusive", CPUs: "4"})
			st.Containers["c2"] = ContainerState{Pool: "exclusive", CPUs: "5"} // behind the tracker's back
			got, err := enc.encode(st)
			require.NoError(t, err)
			var back State
			require.NoError(t, json.Unmarshal(got, &back))
			require.Equal(t, "4", back.Containers["c1"].CPUs, "the change made through SetContainer")
			if tracked {
				require.Equal(t, "0-3", back.Containers["c2"].CPUs, "a tracked State's encode visited a container no setter touched")
			} else {
				require.Equal(t, "5", back.Containers["c2"].CPUs)
			}
		})
	}
}
