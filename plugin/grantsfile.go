package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// grantsFile writes copies of the grants to the grants file. Two writers
// share it: the state writer, in the background and without fsync, for the
// changes NRI handlers make (a container binding its grant, a pod's grants
// forgotten), and Grant, durably, before the kubelet gets its token. Each
// write holds mu and skips a copy older than the file's, so the file only
// moves forward whichever of the two comes last.
type grantsFile struct {
	path    string
	mu      sync.Mutex
	written uint64 // generation of the map on disk
	synced  uint64 // generation of the last map made durable
	// replace writes data over path atomically (temporary file, rename),
	// fsyncing the file and its directory when durable is set. Tests
	// replace it to make writes fail or block.
	replace func(path string, data []byte, durable bool) error
}

func newGrantsFile(path string) *grantsFile {
	return &grantsFile{path: path, replace: replaceFile}
}

// save writes s unless the file already holds it or a newer map. durable
// makes what the file then holds durable, s's write or a newer one.
func (f *grantsFile) save(s grantsSnapshot, durable bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.gen <= f.written {
		if durable {
			return f.syncLocked()
		}
		return nil
	}
	data, err := json.MarshalIndent(s.byToken, "", "  ")
	if err != nil {
		return fmt.Errorf("saving kubelet grants: %w", err)
	}
	if err := f.replace(f.path, data, durable); err != nil {
		return fmt.Errorf("saving kubelet grants: %w", err)
	}
	f.written = s.gen
	if durable {
		f.synced = s.gen
	}
	return nil
}

// sync makes the last write durable, if it is not yet.
func (f *grantsFile) sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncLocked()
}

func (f *grantsFile) syncLocked() error {
	if f.synced == f.written {
		return nil
	}
	if err := syncFile(f.path); err != nil {
		return fmt.Errorf("syncing kubelet grants: %w", err)
	}
	f.synced = f.written
	return nil
}

// replaceFile writes data to a temporary file next to path (mode 0600) and
// renames it over path; with durable, the file is fsynced before the rename
// and its directory after it.
func replaceFile(path string, data []byte, durable bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// A failed write or sync must stop the rename: keep its error.
	if _, err = tmp.Write(data); err == nil && durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil && durable {
		err = syncDir(dir)
	}
	return err
}

// syncFile fdatasyncs the file at path and fsyncs its directory, which
// holds the rename that put it there.
func syncFile(path string) error {
	if err := fdatasync(path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// tempPattern names the temporary files of replaceFile for path:
// .kubelet-grants-* for kubelet-grants.json, as earlier releases did.
func tempPattern(path string) string {
	base := filepath.Base(path)
	return "." + strings.TrimSuffix(base, filepath.Ext(base)) + "-*"
}

// removeStaleTemps deletes temporary files a crash left behind.
func (f *grantsFile) removeStaleTemps() {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(f.path), tempPattern(f.path)))
	for _, s := range stale {
		os.Remove(s)
	}
}
