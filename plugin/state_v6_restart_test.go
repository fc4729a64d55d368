package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// TestV6FileStartsThePlugin (review 59d): a plugin started on a
// schema 6 file (the release before otherContainerKeys) keeps its
// exclusive container where it runs, with its rule, and writes the file
// back in the current schema. Shown to fail with migrations[6] removed.
func TestV6FileStartsThePlugin(t *testing.T) {
	f := newFakeRuntime(t, true)
	path := statePath(f)
	first := startPlugin(t, f, desktop, path)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	cpus := f.cpus(ctr)
	st := first.savedState(t)
	first.stop()

	// The same state as a schema 6 file: no otherContainerKeys.
	for id, c := range st.Containers {
		c.OtherContainerKeys = ""
		st.Containers[id] = c
	}
	payload, err := json.Marshal(st)
	require.NoError(t, err)
	require.NotContains(t, string(payload), "otherContainerKeys")
	data, err := state.EncodeEnvelope(nil, payload, time.Now())
	require.NoError(t, err)
	data = []byte(strings.Replace(string(data), `"schemaVersion":`+strconv.Itoa(state.SchemaVersion), `"schemaVersion":6`, 1))
	require.NoError(t, os.WriteFile(path, data, 0o600))

	second := startPlugin(t, f, desktop, path)
	assert.Contains(t, second.log.String(), fmt.Sprintf("is schema version 6; migrated to %d", state.SchemaVersion))
	_, _, err = f.createContainer(f.runPod(podSpec{name: "next", namespace: "telco"}), "c", 500)
	require.NoError(t, err) // a change, so that the file is written again
	again := second.savedState(t)
	assert.Equal(t, state.SchemaVersion, schemaOf(t, path))
	require.Contains(t, again.Containers, ctr.GetId())
	assert.Equal(t, cpus, again.Containers[ctr.GetId()].CPUs, "kept where it runs")
	assert.Equal(t, cpus, f.cpus(ctr))
	assert.Equal(t, "annotation", again.Containers[ctr.GetId()].Rule)
}
