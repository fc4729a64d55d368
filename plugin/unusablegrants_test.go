package plugin

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A kubelet grants file that cannot be used (unreadable, or damaged and
// not movable aside) never stops the daemon: the grants file is loaded on
// every node, device plugin or not, and plugin.New failed on its read
// error, so the daemon exited and nothing was pinned.

// TestUnreadableGrantsFileStillPins: a grants file that cannot be read (a
// directory here, as an EIO or EACCES would) is moved aside, kept, logged
// and counted, and containers are pinned.
func TestUnreadableGrantsFileStillPins(t *testing.T) {
	f := newFakeRuntime(t, false)
	stateFile := statePath(f)
	path := GrantsFile(stateFile)
	require.NoError(t, os.MkdirAll(path, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(path, "inside"), []byte("x"), 0o600))
	rp := startPlugin(t, f, desktop, stateFile)
	pod := f.runPod(podSpec{name: "a", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	assert.NotEmpty(t, f.cpus(ctr), "pinned")
	assert.Contains(t, rp.log.String(), "cannot be read")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.discarded.WithLabelValues(discardedGrants)))
	aside, _ := filepath.Glob(path + ".unreadable-*")
	require.Len(t, aside, 1, "kept aside, not overwritten")
	inside, err := os.ReadFile(filepath.Join(aside[0], "inside"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(inside))
}

// TestUnmovedGrantsFileIsNotReplacedUntilMovedAside: a damaged grants file
// that cannot be moved aside (a state directory gone read-only) lets the
// daemon start with no grants, and no write replaces it until it has been
// moved aside: it may be the only copy of the kubelet's tokens.
func TestUnmovedGrantsFileIsNotReplacedUntilMovedAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet-grants.json")
	const damaged = `{"3b2a`
	require.NoError(t, os.WriteFile(path, []byte(damaged), 0o600))
	fail := true
	rename := func(from, to string) error {
		if fail && from == path {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EROFS}
		}
		return os.Rename(from, to)
	}
	at := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	file := newGrantsFile(path)
	file.rename = rename
	loaded, err := loadGrantsFile(file, at)
	require.ErrorIs(t, err, errGrantsDiscarded, "the daemon starts with no grants")
	assert.Contains(t, err.Error(), "could not be moved aside")
	assert.Empty(t, loaded.byToken)

	loaded.add("tok", grant{CPUs: "6,14"})
	err = loaded.file.save(loaded.snapshot(), true)
	require.Error(t, err, "not replaced before it is moved aside")
	assert.Contains(t, err.Error(), "must first be moved to "+path+".corrupt-20261207T010203")
	kept, _ := os.ReadFile(path)
	assert.Equal(t, damaged, string(kept))

	fail = false
	require.NoError(t, loaded.file.save(loaded.snapshot(), true))
	aside, _ := os.ReadFile(path + ".corrupt-20261207T010203.000000000Z")
	assert.Equal(t, damaged, string(aside), "moved aside as it was")
	assert.Equal(t, map[string]grant{"tok": {CPUs: "6,14", Seq: 1}}, grantsOnDisk(t, path))
}
