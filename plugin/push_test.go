package plugin

import "testing"

// TestPushSafe: updates go to the runtime outside a reply only when its
// NRI has the fix of containerd/nri#301 (v0.12.1).
func TestPushSafe(t *testing.T) {
	for v, want := range map[string]bool{
		"v0.12.1": true, "v0.12.5": true, "0.13.0": true, "v1.0.0": true, "v0.12.1-rc.1": true,
		"v0.12.0": false, "v0.11.9": false, "v0.8.0": false, "unknown": false, "": false, "v0.x.1": false,
	} {
		if got := pushSafe(v); got != want {
			t.Errorf("pushSafe(%q) = %v, want %v", v, got, want)
		}
	}
}
