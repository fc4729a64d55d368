package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnreadableStateFileStillPins: a state file that cannot be read (a
// directory here, as an EIO or EACCES would) is moved aside and the state
// rebuilt from the runtime; before, its read error failed every connect
// and nothing was pinned.
func TestUnreadableStateFileStillPins(t *testing.T) {
	f := newFakeRuntime(t, false)
	stateFile := statePath(f)
	require.NoError(t, os.MkdirAll(stateFile, 0o700))
	startPlugin(t, f, desktop, stateFile)
	pod := f.runPod(podSpec{name: "a", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	assert.NotEmpty(t, f.cpus(ctr), "pinned")
	aside, _ := filepath.Glob(stateFile + ".unreadable-*")
	assert.Len(t, aside, 1, "kept aside, not overwritten")
}
