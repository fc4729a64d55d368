// Package state is what the plugin remembers across restarts of itself, of
// the runtime and of the node: the state file's types, its envelope (schema
// version and checksum), the migrations from older schema versions, and the
// FileStore that writes it atomically. It imports no part of the plugin, so
// that `nri-cpupool status` reads the file without the NRI glue.
package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// SchemaVersion is the state file's format version. Files of an older
// version are migrated when loaded (see migrations) and rewritten in this
// one at the next write; a file of a newer or unknown version is moved
// aside and state is rebuilt from the runtime.
//
// History:
//   - 1: the first release (containers, previous, pools).
//   - 2: held CPUs of stopped containers (held) replace previous; containers
//     gain what resizes added and whether their CFS quota is lifted.
//   - 3: containers and holds gain whether device IRQs are kept off their
//     CPUs (isolateIRQs) and whether their cgroup is an isolated partition
//     (isolatedPartition).
//   - 4: containers and holds gain their power class (powerClass) and
//     whether they also run on the shared pool (withShared, sharedCPUs);
//     the file gains each power class's CPUs (powerClasses).
//   - 5: containers and holds gain what they hold of each NUMA node's
//     memory and hugepages (memory); a record without it is derived again
//     from the runtime at Synchronize; the file gains each NUMA node's
//     memory and hugepages, for status (numaMemory) (issue 31).
//   - 6: containers and holds gain what decided their pool and CPUs (rule,
//     ruleDetail, deviceNUMA, fromHold); the file gains the last refusal
//     of each recently refused container (refusals), for explain (issue
//     43). A record without a rule was placed by an older release.
//   - 7: containers and holds gain the pod's container-scoped annotation
//     keys that name other containers, when they have none of their own
//     (otherContainerKeys), for explain to tell a container-name typo.
//   - 8: containers and holds gain whether they asked for idle siblings
//     (hideHyperthreads): a core whose sibling was offline counts as
//     whole, so reserved alone cannot tell, and a sibling that comes
//     online later must be held idle for them too.
const SchemaVersion = 8

// State is what survives plugin, runtime and node restarts.
type State struct {
	// Containers are keyed by container id.
	Containers map[string]ContainerState `json:"containers"`
	// Held are the CPUs kept for stopped exclusive containers until their
	// pod's sandbox stops, by "<pod uid>/<container name>".
	Held map[string]HeldState `json:"held,omitempty"`
	// Previous is the form of Held before holds existed: the CPUs of
	// stopped containers, to be given back if still free. It is read from
	// older files (see the plugin's migratePrevious) and no longer written.
	Previous map[string]string `json:"previous,omitempty"`
	// Pools are the pools' cpusets when the file was written, for
	// `nri-cpupool status` and operators.
	Pools map[string]string `json:"pools,omitempty"`
	// PowerClasses are each power class's CPUs when the file was written,
	// for `nri-cpupool status`.
	PowerClasses map[string]string `json:"powerClasses,omitempty"`
	// NUMAMemory is each NUMA node's memory and hugepages when the file
	// was written, for `nri-cpupool status` (numamemory.go).
	NUMAMemory []NUMAMemory `json:"numaMemory,omitempty"`
	// Refusals are the last refusal of each recently refused container,
	// oldest first, at most MaxRefusals (refusals.go).
	Refusals []Refusal `json:"refusals,omitempty"`
	// MigratedFrom is the schema version the file was migrated from when
	// loaded; 0 when it was already current. Never written.
	MigratedFrom int `json:"-"`
	// Written is when the file was written (its envelope's written), as
	// loaded; never written in the state itself.
	Written time.Time `json:"-"`

	// changed are the containers SetContainer and DeleteContainer touched
	// since a FileStore last encoded this State (encode.go), for it to
	// encode those alone; never written.
	changed containerChanges
}

// ContainerState is one container's assignment.
type ContainerState struct {
	PodUID       string `json:"podUID"`
	PodNamespace string `json:"podNamespace"`
	PodName      string `json:"podName"`
	Container    string `json:"container"`
	Pool         string `json:"pool"`
	MilliCPU     int64  `json:"milliCPU"`
	CPUs         string `json:"cpus"`
	Reserved     string `json:"reserved,omitempty"`
	Mems         string `json:"mems"`
	// Added are the CPUs in-place resizes added, comma-separated in the
	// order they were added (a shrink gives back the last first).
	Added string `json:"added,omitempty"`
	// NoCPUQuota tells that the plugin lifted the container's CFS quota.
	NoCPUQuota bool `json:"noCPUQuota,omitempty"`
	// IsolateIRQs tells that device IRQs are kept off its CPUs.
	IsolateIRQs bool `json:"isolateIRQs,omitempty"`
	// IsolatedPartition tells that its cgroup is made an isolated cgroup
	// v2 partition.
	IsolatedPartition bool `json:"isolatedPartition,omitempty"`
	// PowerClass is the power class of an exclusive container's CPUs.
	PowerClass string `json:"powerClass,omitempty"`
	// WithShared tells that an exclusive container also runs on the
	// shared pool, whose CPUs were SharedCPUs at its last update; CPUs are
	// its exclusive part.
	WithShared bool   `json:"withShared,omitempty"`
	SharedCPUs string `json:"sharedCPUs,omitempty"`
	// Memory is what an exclusive container whose mems are pinned holds of
	// each NUMA node: "<node>:memory=<bytes>,<size>kB=<pages>;..."
	// (memoryrecord.go: MemoryRecord, ParseMemory).
	Memory string `json:"memory,omitempty"`
	// Rule is what decided its pool: annotation, qos, default, dra-claim,
	// device-plugin or confined (the allocator's Rule*); RuleDetail, the
	// annotation, claims or setting that did, or why Synchronize confined
	// it. Both are empty in records of releases before schema 6.
	Rule       string `json:"rule,omitempty"`
	RuleDetail string `json:"ruleDetail,omitempty"`
	// DeviceNUMA are the NUMA nodes of its devices, which its exclusive
	// CPUs preferred (device locality).
	DeviceNUMA string `json:"deviceNUMA,omitempty"`
	// FromHold names the stopped container of its pod whose held CPUs it
	// took when it was created (its own previous run, or a completed one).
	FromHold string `json:"fromHold,omitempty"`
	// OtherContainerKeys are the pod's container-scoped annotation keys
	// of ours that name other containers, comma-separated, when it has
	// none of its own (allocator.Rule.OtherContainerKeys); "" in records
	// of releases before schema 7.
	OtherContainerKeys string `json:"otherContainerKeys,omitempty"`
	// HideHyperthreads tells that an exclusive container asked for its
	// cores' other threads idle (hide-hyperthreads.cpupool.dev): Reserved
	// are those siblings, and one offline when it was placed is held idle
	// for it once it comes online. false in records of releases before
	// schema 8, which a restart takes as they are (Reserved says what
	// they hold).
	HideHyperthreads bool `json:"hideHyperthreads,omitempty"`
}

// HeldState is a stopped exclusive container's CPUs, kept for its pod.
type HeldState struct {
	// ContainerID is the stopped container's id.
	ContainerID string `json:"containerID"`
	ContainerState
	// ExitCode is what the runtime reported when the container stopped;
	// absent when it did not say.
	ExitCode *int32 `json:"exitCode,omitempty"`
}

// envelope is the file: a version, a checksum over the exact bytes of the
// state, and the state.
type envelope struct {
	SchemaVersion int             `json:"schemaVersion"`
	Checksum      string          `json:"checksum"`
	Written       time.Time       `json:"written"`
	State         json.RawMessage `json:"state"`
}

// Store keeps the state somewhere durable.
type Store interface {
	// Load returns the remembered state; an empty one when there is none.
	Load() (*State, error)
	// Save replaces the remembered state atomically: a reader sees the old
	// state or the new one, never a mix. It need not be durable across a
	// power loss before Sync.
	Save(*State) error
	// Sync makes the last Save durable.
	Sync() error
	// Close releases what the store holds open between saves.
	Close()
}

var _ Store = (*FileStore)(nil)

// NewState returns an empty state.
func NewState() *State {
	return &State{Containers: map[string]ContainerState{}, Held: map[string]HeldState{}, Previous: map[string]string{}, Pools: map[string]string{}}
}

// FileStore keeps the state in one node-local file, written atomically.
type FileStore struct {
	Path string
	now  func() time.Time
	enc  stateEncoder
	out  []byte // the file's bytes, reused from save to save
	// spare is the next temporary file, created in the background after a
	// save: creating a file is the slowest step of a save on some disks.
	spare chan *os.File
	// preparing counts spares being created, for Close to wait for.
	preparing sync.WaitGroup
	// dir stays open between syncs to fsync the renames.
	dir *os.File
	// unmoved is the file Load could not use (unreadable or unusable)
	// and could not move aside either (a read-only state directory):
	// Save moves it aside before it writes, and writes nothing until
	// it has, so that a rebuilt state never replaces the only copy of
	// what the file held (atomicfile.Discarded.Move). Nil when there is
	// none.
	unmoved *atomicfile.Discarded
	// rename moves a file aside: os.Rename, which tests replace to fail
	// it where the directory stays writable.
	rename atomicfile.Rename
}

// NewFileStore returns a store for path.
func NewFileStore(path string) *FileStore {
	return &FileStore{Path: path, now: time.Now, spare: make(chan *os.File, 1), rename: os.Rename}
}

// tempFile returns the prepared spare file, or creates one.
func (f *FileStore) tempFile() (*os.File, error) {
	select {
	case tmp := <-f.spare:
		return tmp, nil
	default:
		return atomicfile.CreateTemp(f.Path)
	}
}

// prepareSpare creates the next temporary file off the request path.
func (f *FileStore) prepareSpare() {
	tmp, err := atomicfile.CreateTemp(f.Path)
	if err != nil {
		return // the next save creates its own
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return
	}
	select {
	case f.spare <- tmp:
	default:
		tmp.Close()
		os.Remove(tmp.Name())
	}
}

// Close removes the prepared spare file, once it is ready, and closes the
// directory.
func (f *FileStore) Close() {
	f.preparing.Wait()
	if f.dir != nil {
		f.dir.Close()
		f.dir = nil
	}
	select {
	case tmp := <-f.spare:
		tmp.Close()
		os.Remove(tmp.Name())
	default:
	}
}

// removeStaleTemps deletes temporary files a crash left behind.
func (f *FileStore) removeStaleTemps() {
	f.Close()
	atomicfile.RemoveStale(f.Path)
}

// ErrStateDiscarded wraps the reason a state file could not be used; an
// empty state is returned, and the file has been moved aside, or is moved
// aside before the first Save replaces it (a read-only directory).
var ErrStateDiscarded = errors.New("state file discarded")

// Load reads the file. A missing file is an empty state. A truncated,
// corrupt or incompatible file is renamed to <path>.corrupt-<time>, and a
// file that cannot be read (EIO, EACCES) to <path>.unreadable-<time>: an
// empty state is returned with an error wrapping ErrStateDiscarded, so
// the caller rebuilds from the runtime instead of crash-looping or, on a
// disk that went read-only, failing every Synchronize and pinning nothing.
// When the file cannot be moved aside (a read-only state
// directory), it stays where it is, and Save moves it aside before it
// writes, failing until it can: a rebuilt state never replaces the only
// copy of what the file held, records of holds a passing read error hid
// included.
func (f *FileStore) Load() (*State, error) {
	f.removeStaleTemps()
	f.unmoved = nil
	st := NewState()
	discarded := atomicfile.Load(f.Path, f.now(), f.rename, func(data []byte) (err error) {
		st, err = decodeState(data)
		return err
	})
	if discarded == nil {
		return st, nil
	}
	if discarded.Unmoved != nil {
		f.unmoved = discarded
	}
	return NewState(), fmt.Errorf("%w: %v; rebuilding from the runtime", ErrStateDiscarded, discarded)
}

func decodeState(data []byte) (*State, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("not valid JSON (truncated?): %w", err)
	}
	if missing := missingEnvelope(env); missing != "" {
		// Not the plugin's file, or a hand-made one: without this, the
		// checksum's refusal read "file says ," (issue 43).
		return nil, fmt.Errorf("not a state file of nri-cpupool: it has no %s (the plugin writes {\"schemaVersion\": %d, \"checksum\": \"sha256:…\", \"written\": …, \"state\": {…}}); "+
			"name the plugin's state file (--state-file, the config's stateFile); a daemon that finds such a file at start moves it aside and rebuilds the state from the runtime", missing, SchemaVersion)
	}
	if want := checksum(env.State); env.Checksum != want {
		return nil, fmt.Errorf("checksum mismatch (file says %s, content is %s)", env.Checksum, want)
	}
	if env.SchemaVersion != SchemaVersion {
		migrate, ok := migrations[env.SchemaVersion]
		switch {
		case ok:
			st, err := migrate(env.State)
			if err != nil {
				return nil, fmt.Errorf("schema version %d: %w", env.SchemaVersion, err)
			}
			st.MigratedFrom, st.Written = env.SchemaVersion, env.Written
			return st, nil
		case env.SchemaVersion > SchemaVersion:
			return nil, fmt.Errorf("schema version %d was written by a newer nri-cpupool; this build reads versions 1 to %d", env.SchemaVersion, SchemaVersion)
		default:
			return nil, fmt.Errorf("unknown schema version %d; this build reads versions 1 to %d", env.SchemaVersion, SchemaVersion)
		}
	}
	st, err := decodePayload(env.State)
	if err != nil {
		return nil, err
	}
	st.Written = env.Written
	return st, nil
}

// missingEnvelope names the envelope's fields a file lacks ("" when it
// has checksum and state): schemaVersion, checksum and state. A file with
// both whose schemaVersion is 0 or absent is refused for its version.
func missingEnvelope(env envelope) string {
	if env.Checksum != "" && env.State != nil {
		return ""
	}
	var missing []string
	if env.SchemaVersion == 0 {
		missing = append(missing, "schemaVersion")
	}
	if env.Checksum == "" {
		missing = append(missing, "checksum")
	}
	if env.State == nil {
		missing = append(missing, "state")
	}
	switch len(missing) {
	case 0:
		return ""
	case 1:
		return missing[0]
	}
	return strings.Join(missing[:len(missing)-1], ", ") + " or " + missing[len(missing)-1]
}

// decodePayload reads the state of the current schema strictly: an unknown
// field is an error.
func decodePayload(payload []byte) (*State, error) {
	st := NewState()
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(st); err != nil {
		return nil, fmt.Errorf("state content: %w", err)
	}
	for _, m := range []*map[string]string{&st.Previous, &st.Pools} {
		if *m == nil {
			*m = map[string]string{}
		}
	}
	if st.Containers == nil {
		st.Containers = map[string]ContainerState{}
	}
	if st.Held == nil {
		st.Held = map[string]HeldState{}
	}
	return st, nil
}

// EncodeEnvelope appends the envelope around the payload as it is to dst:
// json.Marshal would re-scan (compact) the whole payload. Outside this
// package, tests use it to hand any payload to Load past the checksum.
func EncodeEnvelope(dst, payload []byte, written time.Time) ([]byte, error) {
	head, err := json.Marshal(struct {
		SchemaVersion int       `json:"schemaVersion"`
		Checksum      string    `json:"checksum"`
		Written       time.Time `json:"written"`
	}{SchemaVersion, checksum(payload), written})
	if err != nil {
		return nil, err
	}
	data := append(dst, head[:len(head)-1]...)
	data = append(data, `,"state":`...)
	data = append(data, payload...)
	return append(data, '}'), nil
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Save writes the state atomically: a temporary file in the same directory,
// renamed over the old file. Mode 0600. It does not fsync: a crashed
// process loses nothing it wrote, and after a kernel crash or power loss
// no container survives and Load moves a damaged file aside. Sync makes
// the writes durable (on a timer and on shutdown).
func (f *FileStore) Save(st *State) error {
	payload, err := f.enc.encode(st)
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	data, err := EncodeEnvelope(f.out[:0], payload, f.now().UTC())
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	f.out = data
	if err := f.unmoved.Move(f.rename); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	f.unmoved = nil
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	tmp, err := f.tempFile()
	if err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	pending := &atomicfile.Pending{File: tmp}
	defer pending.Cleanup()
	if err := pending.Replace(f.Path, data, false); err != nil {
		// The error names the path and the step (atomicfile.Pending).
		return fmt.Errorf("replacing state: %w", err)
	}
	f.preparing.Go(f.prepareSpare)
	return nil
}

// Sync makes the last Save durable: fdatasync of the file, then fsync of
// the directory that holds the rename.
func (f *FileStore) Sync() error {
	if err := atomicfile.Fdatasync(f.Path); err != nil {
		return fmt.Errorf("syncing state: %w", err)
	}
	dir := filepath.Dir(f.Path)
	if f.dir == nil {
		var err error
		if f.dir, err = os.Open(dir); err != nil {
			return fmt.Errorf("syncing state directory: %w", err)
		}
	}
	if err := f.dir.Sync(); err != nil {
		return fmt.Errorf("syncing state directory %s: %w", dir, err)
	}
	return nil
}

// ReadState reads a state file without touching it (for `status`); unlike
// Load it never moves a bad file aside. Only a regular file is read
// (atomicfile.ReadRegular): `status` on a named pipe at the path waited
// for a writer that never came.
func ReadState(path string) (*State, error) {
	data, err := atomicfile.ReadRegular(path, atomicfile.NoLimit)
	switch {
	case errors.Is(err, atomicfile.ErrNotRegular):
		return nil, fmt.Errorf("reading state: %w (the plugin writes its state as a regular file; "+
			"when it starts it moves what is there aside to %s.unreadable-<time> and rebuilds the state from the runtime; "+
			"or remove it, or name the plugin's --state-file)", err, path)
	case err != nil:
		return nil, fmt.Errorf("reading state: %w (is the plugin running with this --state-file?)", err)
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	return st, nil
}
