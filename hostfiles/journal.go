package hostfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// JournalFile is the journal's name in the state directory.
const JournalFile = "host-originals.json"

// JournalPath is the journal that goes with a state file.
func JournalPath(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), JournalFile)
}

// journalVersion is the journal's format version. It is raised only for
// a change an older build cannot restore from (a record's path or
// original meaning something else): a field added beside the ones a
// build knows is read by it, the unknown field ignored (decodeJournal),
// since path, original and owner suffice to put a file back. Version 1
// gained order, identity and refused that way; builds before this rule
// refused unknown fields and moved such a journal aside.
const journalVersion = 1

// Record is what the journal keeps of one changed host file.
type Record struct {
	// Original is the file's content before the plugin first changed it,
	// as read (the kernel's own formatting, trailing newline removed).
	Original string `json:"original"`
	// Owner is the Source that changed it ("irq").
	Owner string `json:"owner"`
	// Order is the change's Order: restores run in descending order.
	Order int `json:"order,omitempty"`
	// Identity is what the file belonged to when its original was
	// recorded (Identifier), "" when its Source does not say: an IRQ
	// number's device. A record whose file now belongs to something else
	// is dropped, not restored.
	Identity string `json:"identity,omitempty"`
	// Root and Rel name the file by the root it lay under when it was
	// recorded (Journal.Rebase: "sys" below sysfsRoot, "proc", "cgroup")
	// and its path below it, so that a process that sees the same kernel
	// files under other roots (the chart's pod under /host, the package on
	// the node under /) restores it where it sees it. Empty for a file
	// under no root (a unit's property, a thread's affinity) and in
	// records written before they existed, which keep their path.
	Root string `json:"root,omitempty"`
	Rel  string `json:"rel,omitempty"`
}

// journalContent is the file's content: the boot the records belong to
// and the records by host path.
type journalContent struct {
	BootID  string    `json:"bootID"`
	Records recordMap `json:"records"`
	// Refused are the files the kernel refused for good in this boot, with
	// the reason, for the audit (a kernel-managed IRQ is not movable).
	Refused map[string]string `json:"refused,omitempty"`
}

// journalEnvelope adds a version and a checksum over the exact bytes of
// the content, like the state file's.
type journalEnvelope struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Content  json.RawMessage `json:"content"`
}

// Journal is the durable record of the original content of host files the
// plugin has changed. It is not safe for concurrent use: the Reconciler
// owns it once started.
type Journal struct {
	fs      FS
	path    string
	bootID  string
	records map[string]Record
	refused map[string]string
	now     func() time.Time
	// roots are this process's roots by name (Rebase).
	roots map[string]string
	// unsaved says that the records in memory differ from the file's
	// without a Commit to write them (Rebase named the roots of old
	// records): the next Commit writes them even when it adds and drops
	// nothing.
	unsaved bool
}

// ErrJournalDiscarded wraps the reason a journal could not be used.
var ErrJournalDiscarded = errors.New("journal of original host values discarded")

// OpenJournal reads the journal at path for the running boot. A missing
// journal is empty. A journal of another boot is empty too (the kernel has
// reset the files since), and the returned note says how many records were
// set aside; it is replaced at the next write. An unknown boot id (empty:
// boot_id could not be read now, or when the journal was written) is not
// another boot: the records are kept, and the journal keeps the id it
// has, so an empty id never replaces a real one (see sameBoot); the note
// says so. A journal that cannot be
// decoded is renamed to <path>.corrupt-<time>, and an empty journal is
// returned with an error wrapping ErrJournalDiscarded: the originals it
// held are lost, which the operator must hear about.
func OpenJournal(fsys FS, path, bootID string) (j *Journal, note string, err error) {
	j = &Journal{fs: fsys, path: path, bootID: strings.TrimSpace(bootID), records: map[string]Record{}, now: time.Now}
	atomicfile.RemoveStale(path) // a crash during a write leaves its temporary file
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", path, err)
	}
	content, problem := decodeJournal(data)
	if problem != nil {
		aside := fmt.Sprintf("%s.corrupt-%s", path, j.now().UTC().Format("20060102T150405.000000000Z"))
		if err := fsys.Rename(path, aside); err != nil {
			return nil, "", fmt.Errorf("journal %s is unusable (%v) and could not be moved aside: %w", path, problem, err)
		}
		return j, "", fmt.Errorf("%w: %s: %v; moved to %s: host files it listed keep their current values", ErrJournalDiscarded, path, problem, aside)
	}
	if !sameBoot(content.BootID, j.bootID) {
		if n := len(content.Records); n > 0 {
			note = fmt.Sprintf("%s: %d original values are of boot %s, not this boot %s; set aside (a reboot reset those files)", path, n, content.BootID, j.bootID)
		}
		return j, note, nil
	}
	if j.bootID == "" {
		j.bootID = content.BootID
		if n := len(content.Records); n > 0 {
			note = fmt.Sprintf("%s: this boot's id is unknown; the %d original values recorded in boot %s are kept as this boot's (restoring one after a reboot would write a value the kernel accepts, if not the one it booted with; dropping them would lose this boot's originals for good)", path, n, content.BootID)
		}
	}
	for p, r := range content.Records {
		j.records[p] = r
	}
	j.refused = content.Refused
	return j, note, nil
}

// ReadJournal reads a journal without changing anything (for the audit
// and status): its records and refusals, and whether it is of the boot
// named (a journal of another boot is history).
func ReadJournal(path, bootID string) (records map[string]Record, refused map[string]string, thisBoot bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Record{}, map[string]string{}, true, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("reading %s: %w", path, err)
	}
	c, err := decodeJournal(data)
	if err != nil {
		return nil, nil, false, fmt.Errorf("journal %s: %w", path, err)
	}
	if c.Records == nil {
		c.Records = map[string]Record{}
	}
	if c.Refused == nil {
		c.Refused = map[string]string{}
	}
	return c.Records, c.Refused, sameBoot(c.BootID, strings.TrimSpace(bootID)), nil
}

// sameBoot tells whether a journal written in boot stored is of the
// running boot. An empty id is unknown, not another boot: a boot_id that
// could not be read must not set aside the originals of this very boot,
// whose files would then keep the plugin's values until the next reboot.
// The other way round (the records are of an earlier boot) the restore
// writes an earlier boot's original, a value the kernel accepted before.
func sameBoot(stored, running string) bool {
	return stored == "" || running == "" || stored == running
}

func decodeJournal(data []byte) (*journalContent, error) {
	var env journalEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("not valid JSON (truncated?): %w", err)
	}
	if env.Version != journalVersion {
		return nil, fmt.Errorf("version %d; this build reads version %d", env.Version, journalVersion)
	}
	if want := checksum(env.Content); env.Checksum != want {
		return nil, fmt.Errorf("checksum mismatch (file says %s, content is %s)", env.Checksum, want)
	}
	// Unknown fields are a newer build's (journalVersion): ignored, not
	// refused, so that a downgrade keeps the originals. The checksum
	// already holds the content to what was written.
	var c journalContent
	if err := json.Unmarshal(env.Content, &c); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	for p, r := range c.Records {
		if !filepath.IsAbs(p) || r.Owner == "" {
			return nil, fmt.Errorf("record %q: needs an absolute path and an owner", p)
		}
	}
	return &c, nil
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Path is where the journal lives.
func (j *Journal) Path() string { return j.path }

// Get returns the record of a host file.
func (j *Journal) Get(path string) (Record, bool) {
	r, ok := j.records[path]
	return r, ok
}

// Records returns a copy of every record, by host path.
func (j *Journal) Records() map[string]Record { return maps.Clone(j.records) }

// Len is the number of records.
func (j *Journal) Len() int { return len(j.records) }

// Commit records new originals and drops the records of files that have
// their original back (or are gone), in one durable write. Only when it
// returns nil has memory changed; on error neither memory nor the file
// has, so new originals' files must not be written, and dropped records
// stay (their restore is repeated, harmlessly). A path already recorded
// keeps its first original.
func (j *Journal) Commit(add map[string]Record, drop []string) error {
	if len(add) == 0 && len(drop) == 0 && !j.unsaved {
		return nil // most passes: nothing to copy the records for
	}
	next := maps.Clone(j.records)
	changed := false
	for _, p := range drop {
		if _, ok := next[p]; ok {
			delete(next, p)
			changed = true
		}
	}
	for p, r := range add {
		if _, ok := next[p]; !ok {
			if r.Root == "" {
				r.Root, r.Rel = j.rootOf(p)
			}
			next[p] = r
			changed = true
		}
	}
	if !changed && !j.unsaved {
		return nil
	}
	if err := j.save(next); err != nil {
		return err
	}
	j.records, j.unsaved = next, false
	return nil
}

// SetRefused replaces the refusals kept for the audit, saving them if they
// changed. They need no durability: a lost list is rebuilt by the next
// pass.
func (j *Journal) SetRefused(refused map[string]string) error {
	if maps.Equal(refused, j.refused) || len(refused) == 0 && len(j.refused) == 0 {
		return nil
	}
	prev := j.refused
	j.refused = refused
	if err := j.save(j.records); err != nil {
		j.refused = prev
		return err
	}
	j.unsaved = false
	return nil
}

func (j *Journal) save(records map[string]Record) error {
	content, err := json.Marshal(journalContent{BootID: j.bootID, Records: records, Refused: j.refused})
	if err != nil {
		return fmt.Errorf("encoding journal: %w", err)
	}
	data, err := json.Marshal(journalEnvelope{Version: journalVersion, Checksum: checksum(content), Content: content})
	if err != nil {
		return fmt.Errorf("encoding journal: %w", err)
	}
	if err := j.fs.ReplaceFile(j.path, append(data, '\n')); err != nil {
		return fmt.Errorf("writing journal %s: %w", j.path, err)
	}
	return nil
}

// The roots Rebase takes, by the names the records keep.
const (
	RootSys    = "sys"
	RootProc   = "proc"
	RootCgroup = "cgroup"
)

// Rebase gives the journal this process's roots, by name (the plugin's:
// "sys" its sysfsRoot's sys/, "proc" its procRoot, "cgroup" its
// cgroupRoot), before the reconciler uses it. A record that names a root
// is keyed again by this process's path to it (Root, Rel): the same
// kernel file, seen through another mount. A record whose new path is
// already recorded keeps its old path (which of the two was first is not
// known; the confinement of restores then decides), as does one whose Rel
// leaves its root. Commit names the root of each new record; Rebase
// names it for a record without one (written by a build before records
// named their roots) that lies under one of these roots, so that a node
// that ran the old chart (/host/sys/...) has its records found under the
// node's roots once the new chart's pod has run. It
// returns how many records moved; nothing is written until the next
// Commit, which writes the named roots even when nothing else changed.
func (j *Journal) Rebase(roots map[string]string) int {
	j.roots = map[string]string{}
	for name, dir := range roots {
		if dir != "" {
			j.roots[name] = filepath.Clean(dir)
		}
	}
	moved := 0
	for _, old := range slices.Sorted(maps.Keys(j.records)) {
		r := j.records[old]
		if r.Root == "" {
			if r.Root, r.Rel = j.rootOf(old); r.Root != "" {
				j.records[old] = r
				j.unsaved = true
			}
			continue
		}
		dir, ok := j.roots[r.Root]
		if !ok || r.Rel == "" || !filepath.IsLocal(r.Rel) {
			continue
		}
		now := filepath.Join(dir, r.Rel)
		if now == old {
			continue
		}
		if _, taken := j.records[now]; taken {
			continue
		}
		delete(j.records, old)
		j.records[now] = r
		moved++
	}
	return moved
}

// rootOf names the root a path lies under, the innermost one (the cgroup
// root below sysfsRoot's sys/), and the path below it; "" when none.
func (j *Journal) rootOf(path string) (root, rel string) {
	best := ""
	for name, dir := range j.roots {
		r, err := filepath.Rel(dir, path)
		if err != nil || !filepath.IsLocal(r) {
			continue
		}
		if best == "" || len(dir) > len(j.roots[best]) {
			best, rel = name, r
		}
	}
	return best, rel
}
