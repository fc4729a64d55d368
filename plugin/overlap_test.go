package plugin

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoPluginsOfOneNameMakeTheRuntimeRefuseContainers records what the
// runtime does when a second process registers under the same name and
// index while the first still runs (an upgrade that overlaps, without the
// state directory lock): NRI takes both, calls both, and refuses every
// container both adjust, as a conflict between two plugins. This is why a
// new process waits for the lock (state.Lock) before it registers, rather
// than registering beside the old one.
func TestTwoPluginsOfOneNameMakeTheRuntimeRefuseContainers(t *testing.T) {
	f := newFakeRuntime(t, true)
	startPlugin(t, f, xeon, statePath(f))
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	_, _, err := f.createContainer(web, "before", 500)
	require.NoError(t, err, "one plugin: the container is created")

	// A second process of the same name, with its own state directory
	// (the lock would have stopped it on the same one).
	startPlugin(t, f, xeon, filepath.Join(f.dir, "other", "state.json"))
	_, _, err = f.createContainer(web, "during", 500)
	require.Error(t, err, "two plugins of one name: NRI refuses a container both pin")
	assert.Contains(t, err.Error(), `plugins "10-cpupool" and "10-cpupool" both tried to set`)
}
