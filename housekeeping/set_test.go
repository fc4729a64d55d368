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
			set, widened := Set(online, tc.kept, tc.floor)
			assert.Equal(t, tc.want, set.String())
			assert.Equal(t, tc.widened, widened.String())
		})
	}
}
