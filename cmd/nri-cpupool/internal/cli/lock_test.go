package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunGoesOnWithoutAWritableStateDirectory: a state directory whose
// lock cannot be opened does not end run (docs/state.md: pinning never
// depends on a writable disk); the log says why and what it risks.
func TestRunGoesOnWithoutAWritableStateDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	lock, err := lockStateDir(context.Background(), filepath.Join(file, "state.json"), log)
	require.NoError(t, err)
	require.NotNil(t, lock, "run goes on")
	defer lock.Close()
	assert.Contains(t, logged.String(), "level=warning")
	assert.Contains(t, logged.String(), "running without it")
}
