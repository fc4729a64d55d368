package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// grantsFile writes copies of the grants to the grants file. Two writers
// share it: the state writer, in the background, for the changes NRI
// handlers make (a container binding its grant, a pod's grants forgotten),
// and Grant, before the kubelet gets its token. Each write holds mu and
// skips a copy older than the file's, so the file only moves forward
// whichever of the two comes last.
//
// Both writers fsync (the temporary file before the rename, the directory
// after it), unlike the state file's writer. The state file may be lost to
// a power loss because no container survives one: the runtime then has
// nothing left for it to describe. The kubelet's checkpoint survives it,
// and the kubelet re-creates every container of the resource with its
// token after the reboot, so the grants must too: a background write
// renamed without fsync could leave the file empty or torn after a power
// loss, losing the tokens Grant had made durable. A grants write is rare (a
// container of the resource bound, a pod removed) and happens in the
// background, so the fsync delays no reply. A file damaged anyway (a disk
// fault, a hand edit) or unreadable is moved aside at start (see loadGrants).
type grantsFile struct {
	path    string
	mu      sync.Mutex
	written uint64 // generation of the map on disk
	synced  uint64 // generation of the last map made durable
	// replace writes data over path atomically (temporary file, rename),
	// fsyncing the file and its directory when durable is set. Tests
	// replace it to make writes fail or block.
	replace func(path string, data []byte, durable bool) error
	// unmoved is the file loadGrants could not use nor move aside (a
	// read-only state directory): save moves it aside before it writes,
	// and writes nothing until it has, so that the grants rebuilt from
	// the runtime never replace the only copy of those it held. Nil when
	// there is none.
	unmoved *atomicfile.Discarded
	// rename moves the file aside: os.Rename, which tests replace.
	rename atomicfile.Rename
}

func newGrantsFile(path string) *grantsFile {
	return &grantsFile{path: path, replace: atomicfile.Replace, rename: os.Rename}
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
	if err := f.unmoved.Move(f.rename); err != nil {
		return fmt.Errorf("saving kubelet grants: %w", err)
	}
	f.unmoved = nil
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
	if err := atomicfile.Sync(f.path); err != nil {
		return fmt.Errorf("syncing kubelet grants: %w", err)
	}
	f.synced = f.written
	return nil
}

// legacyTempPattern names the temporary files releases before
// internal/atomicfile gave the grants file: .kubelet-grants-* for
// kubelet-grants.json.
func legacyTempPattern(path string) string {
	base := filepath.Base(path)
	return "." + strings.TrimSuffix(base, filepath.Ext(base)) + "-*"
}

// removeStaleTemps deletes temporary files a crash left behind, also those
// of an earlier release.
func (f *grantsFile) removeStaleTemps() {
	atomicfile.RemoveStale(f.path, legacyTempPattern(f.path))
}
