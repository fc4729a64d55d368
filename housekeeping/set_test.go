package housekeeping

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

func TestSetNeverBelowTheFloor(t *testing.T) {
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	for _, tc := range []struct {
		name          string
		kept          Kept
		floor         int
		want, widened string
	}{
		{"nothing kept", Kept{}, 1, "0-7", ""},
		{"held", Kept{Held: cpuset.New(2, 3)}, 1, "0-1,4-7", ""},
		{"held and idle", Kept{Held: cpuset.New(2), Idle: cpuset.New(4, 5, 6, 7)}, 2, "0-1,3", ""},
		{"offline CPUs ignored", Kept{Held: cpuset.New(2, 9)}, 1, "0-1,3-7", ""},
		{"idle given back first", Kept{Held: cpuset.New(0, 1, 2, 3), Idle: cpuset.New(4, 5, 6)}, 3, "4-5,7", "4-5"},
		{"then held", Kept{Held: cpuset.New(0, 1, 2, 3, 4, 5), Idle: cpuset.New(6)}, 4, "0-1,6-7", "0-1,6"},
		{"held and idle overlap", Kept{Held: cpuset.New(0, 1, 2, 3, 4, 5, 6), Idle: cpuset.New(6)}, 2, "0,7", "0"},
		{"floor above the node", Kept{Held: cpuset.New(0, 1)}, 20, "0-7", "0-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, widened := Set(online, cpuset.New(), tc.kept, tc.floor)
			assert.Equal(t, tc.want, set.String())
			assert.Equal(t, tc.widened, widened.String())
		})
	}
}

// TestSetFloorOutsideIsolated (issue 41, item 9): the floor counts the
// CPUs host processes run on, not the isolated ones; an isolated kept CPU
// is never given back for it; when every online CPU is isolated, they
// all count.
func TestSetFloorOutsideIsolated(t *testing.T) {
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	for _, tc := range []struct {
		name          string
		isolated      cpuset.CPUSet
		kept          Kept
		floor         int
		want, widened string
	}{
		{"isolated CPUs do not count", cpuset.New(6, 7), Kept{Held: cpuset.New(1, 2, 3, 4, 5)}, 2, "0-1,6-7", "1"},
		{"met without the isolated ones", cpuset.New(6, 7), Kept{Held: cpuset.New(2, 3, 4, 5)}, 2, "0-1,6-7", ""},
		{"idle first, never an isolated one", cpuset.New(0, 1), Kept{Held: cpuset.New(2, 3, 4), Idle: cpuset.New(0, 1, 5, 6)}, 4, "2,5-7", "2,5-6"},
		{"isolated held stay kept", cpuset.New(6, 7), Kept{Held: cpuset.New(1, 2, 3, 4, 5, 6, 7)}, 3, "0-2", "1-2"},
		{"cannot be met: every CPU not isolated", cpuset.New(4, 5, 6, 7), Kept{Held: online}, 6, "0-3", "0-3"},
		{"every CPU isolated: all count", online, Kept{Held: cpuset.New(0, 1, 2, 3, 4, 5)}, 3, "0,6-7", "0"},
		{"offline isolated CPU", cpuset.New(7, 9), Kept{Held: cpuset.New(1, 2, 3, 4, 5, 6)}, 2, "0-1,7", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, widened := Set(online, tc.isolated, tc.kept, tc.floor)
			assert.Equal(t, tc.want, set.String())
			assert.Equal(t, tc.widened, widened.String())
		})
	}
}
