package hostfiles

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJournalOfAnotherBootIsSetAside: after a reboot the kernel has reset
// the files; restoring the previous boot's originals would overwrite the
// new boot's values.
func TestJournalOfAnotherBootIsSetAside(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x"})
	src := newSource("s")
	first := openInstance(t, OS{}, tr, bootA, src)
	src.set(map[string]string{tr.path("a"): "y"})
	require.NoError(t, first.r.Flush())
	first.r.Close()
	// The reboot: the kernel's value is back, then something else sets it.
	require.NoError(t, os.WriteFile(tr.path("a"), []byte("booted\n"), 0o644))

	j, note, err := OpenJournal(OS{}, tr.journal(), "another-boot\n")
	require.NoError(t, err)
	assert.Contains(t, note, "1 original values are of boot "+bootA)
	assert.Zero(t, j.Len())
	r := NewReconciler(OS{}, j, first.log, DefaultTiming, newSource("s"))
	require.NoError(t, r.Flush())
	assert.Equal(t, "booted", tr.read(t, "a"), "left as this boot has it")
}

// TestCorruptJournalIsMovedAside: a journal that cannot be read is kept
// for the operator, and the error says what was lost.
func TestCorruptJournalIsMovedAside(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":      `{"version":1,"checksum":"sha256:`,
		"checksum":       `{"version":1,"checksum":"sha256:00","content":{"bootID":"b","records":{}}}`,
		"newer version":  `{"version":2,"checksum":"x","content":{}}`,
		"relative path":  journalBytes(t, map[string]Record{"irq/1": {Original: "1", Owner: "irq"}}),
		"missing owner":  journalBytes(t, map[string]Record{"/proc/irq/1/smp_affinity_list": {Original: "1"}}),
		"unknown fields": `{"version":1,"checksum":"sha256:x","content":{"bootID":"b","records":{},"extra":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, JournalFile)
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			j, _, err := OpenJournal(OS{}, path, bootA)
			require.ErrorIs(t, err, ErrJournalDiscarded)
			assert.Contains(t, err.Error(), "moved to "+path+".corrupt-")
			require.NotNil(t, j)
			assert.Zero(t, j.Len())
			aside, _ := filepath.Glob(path + ".corrupt-*")
			require.Len(t, aside, 1)
			kept, _ := os.ReadFile(aside[0])
			assert.Equal(t, content, string(kept))
		})
	}
}

func journalBytes(t *testing.T, records map[string]Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), JournalFile)
	j, _, err := OpenJournal(OS{}, path, bootA)
	require.NoError(t, err)
	require.NoError(t, j.save(records))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestJournalFileIsPrivate: the originals live in a 0600 file.
func TestJournalFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", JournalFile)
	j, _, err := OpenJournal(OS{}, path, bootA)
	require.NoError(t, err)
	require.NoError(t, j.Commit(map[string]Record{"/proc/irq/1/smp_affinity_list": {Original: "0-3", Owner: "irq"}}, nil))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*tmp*"))
	assert.Empty(t, left, "no temporary file left")
	assert.Equal(t, "/var/lib/nri-cpupool/"+JournalFile, JournalPath("/var/lib/nri-cpupool/state.json"))
}
