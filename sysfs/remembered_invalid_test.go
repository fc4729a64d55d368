package sysfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// editedRecord: epyc-1s-nps4 with CPU 64 (sibling of CPU 0) hot-removed;
// the record's entry for 64 is edited by mutate (a record from another
// shape of the machine, or hand-edited).
func editedRecord(t *testing.T, mutate func(*sysfs.RememberedCPU)) (now *sysfs.Topology, rec sysfs.Remembered) {
	t.Helper()
	root := fixture.Root(t, "epyc-1s-nps4")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ = full.Remember(sysfs.Remembered{})
	for i := range rec.CPUs {
		if rec.CPUs[i].ID == 64 {
			mutate(&rec.CPUs[i])
		}
	}
	hotRemove(t, root, full, 64)
	now, err = sysfs.Discover(root)
	require.NoError(t, err)
	return now, rec
}

// A record naming a CPU twice (hand-edited, concatenated) puts it back
// once, and the repeat is said.
func TestRememberedDuplicateCPUIsPutBackOnce(t *testing.T) {
	now, rec := editedRecord(t, func(*sysfs.RememberedCPU) {})
	for _, c := range rec.CPUs {
		if c.ID == 64 {
			rec.CPUs = append(rec.CPUs, c)
		}
	}
	back := now.WithRemembered(rec)
	n := 0
	for _, c := range back.CPUs {
		if c.ID == 64 {
			n++
		}
	}
	assert.Equal(t, 1, n, "CPU 64 appears %d times in the topology", n)
	assert.Len(t, back.CPUs, len(now.CPUs)+1)
	assert.Equal(t, []string{"CPU 64: listed again (the first entry is kept)"}, now.RememberedDropped(rec))
}

// A remembered NUMA node the node does not have (a record from another
// shape of the machine): the CPU would be in no NUMA node's list, so it
// is not put back, and that is said.
func TestRememberedCPUOnAMissingNUMANodeIsNotPutBack(t *testing.T) {
	now, rec := editedRecord(t, func(r *sysfs.RememberedCPU) { r.NUMA = 9 })
	back := now.WithRemembered(rec)
	assert.False(t, back.Present.Contains(64), "absent CPU 64, remembered on NUMA node 9, is put back")
	for _, c := range back.CPUs {
		assert.NotEqual(t, 64, c.ID)
	}
	assert.Equal(t, []string{"CPU 64: on NUMA node 9, which this node does not have"}, now.RememberedDropped(rec))
}

// A record far larger than any node's is refused without being read
// whole.
func TestRememberedRecordTooLargeIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), sysfs.RememberedFile)
	big := `{"version":1,"cpus":[` + strings.Repeat(" ", 5<<20) + `]}`
	require.NoError(t, os.WriteFile(path, []byte(big), 0o600))
	_, err := sysfs.ReadRemembered(path)
	require.ErrorIs(t, err, atomicfile.ErrTooLarge)
	assert.EqualError(t, err, fmt.Sprintf("%s: %d bytes, larger than the %d bytes read of it at most; not read: not a record of this daemon's",
		path, len(big), 4<<20))
}

// A record that is not a regular file (a named pipe nobody writes) is
// refused without being opened to read: the daemon reads it at its start
// and under its lock at Configure, where a blocked open is a hang.
func TestRememberedRecordThatIsNoFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), sysfs.RememberedFile)
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, err := sysfs.ReadRemembered(path)
	require.ErrorIs(t, err, atomicfile.ErrNotRegular)
	assert.EqualError(t, err, path+": a named pipe, not a regular file; not read: the record is a file the daemon writes; remove it, and the daemon writes the record there at its next start or CPU change")
}

// A directory at the record's path cannot be replaced by the write's
// rename (os.Rename says only "file exists"): the write says what is
// there and the way out, as the read does.
func TestRememberedRecordThatIsADirectoryIsNotWrittenAndSaysHowToFixIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), sysfs.RememberedFile)
	require.NoError(t, os.Mkdir(path, 0o700))
	err := sysfs.WriteRemembered(path, sysfs.Remembered{Version: 1})
	require.ErrorIs(t, err, atomicfile.ErrNotRegular)
	assert.EqualError(t, err, path+": a directory, not a regular file; not written: the record is a file the daemon writes; remove it, and the daemon writes the record there at its next start or CPU change")
	_, err = sysfs.ReadRemembered(path)
	assert.EqualError(t, err, path+": a directory, not a regular file; not read: the record is a file the daemon writes; remove it, and the daemon writes the record there at its next start or CPU change")
}
