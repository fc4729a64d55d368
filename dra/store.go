package dra

// The claim store: the prepared claims in memory (by UID, with their
// tokens and the CPUs they hold), each kept encoded for the claims file,
// and that file, written atomically so that a restart finds every claim
// the kubelet was told is prepared.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// ClaimsFile is the claims file for a state file: next to it.
func ClaimsFile(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), "dra-claims.json")
}

// claimsVersion is the schema of the claims file.
const claimsVersion = 1

type claimsDoc struct {
	Version int               `json:"version"`
	Claims  map[string]*Claim `json:"claims"`
}

// store keeps the claims file. Two writers share it: Prepare and Unprepare
// write before they answer the kubelet, and the background writer writes
// what container bindings changed. Each write carries a generation and the
// store skips a copy older than the file's, so the file only moves forward.
//
// Writes are atomic (temporary file, rename) but not fsynced: a process
// crash (kill -9) loses nothing write() handed to the kernel, and a power
// loss also ends every container, after which the kubelet prepares every
// claim again (the CDI specs live in tmpfs and are gone too) and the
// driver places what it no longer knows anew. Close makes the last write
// durable.
type store struct {
	path    string
	mu      sync.Mutex
	written uint64
	synced  bool
	// replace writes data over path atomically (atomicfile.Replace).
	// Tests replace it to make writes fail.
	replace func(path string, data []byte, durable bool) error
}

func newStore(path string) *store { return &store{path: path, replace: atomicfile.Replace} }

// load reads the claims file. A missing file is no claims. A file that
// cannot be parsed is moved aside, with the reason, and the driver starts
// with no claims: the kubelet prepares again the claims of pods it starts,
// and a claim whose container runs is refused nothing (its CPUs stay held
// by the container).
func (s *store) load() (map[string]*Claim, string, error) {
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return map[string]*Claim{}, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("reading DRA claims: %w", err)
	}
	var doc claimsDoc
	err = json.Unmarshal(data, &doc)
	if err == nil && doc.Version != claimsVersion {
		err = fmt.Errorf("schema version %d, this daemon reads %d", doc.Version, claimsVersion)
	}
	if err == nil {
		err = checkClaims(doc.Claims)
	}
	if err != nil {
		aside := fmt.Sprintf("%s.corrupt-%s", s.path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(s.path, aside); rerr != nil {
			return nil, "", fmt.Errorf("DRA claims %s: %v, and moving it aside: %w", s.path, err, rerr)
		}
		return map[string]*Claim{}, fmt.Sprintf("DRA claims %s: %v; moved to %s, starting with no claims", s.path, err, aside), nil
	}
	if doc.Claims == nil {
		doc.Claims = map[string]*Claim{}
	}
	return doc.Claims, "", nil
}

// checkClaims refuses a file whose entries are incomplete.
func checkClaims(claims map[string]*Claim) error {
	for uid, c := range claims {
		if c == nil || c.Requests == nil {
			return fmt.Errorf("claim %s has no requests", uid)
		}
		for name, r := range c.Requests {
			if r == nil || r.Token == "" || r.Pool == "" {
				return fmt.Errorf("claim %s request %s is incomplete", uid, name)
			}
			for _, nm := range r.Memory {
				if nm.Node < 0 || nm.Memory < 0 || nm.Memory > maxBytes {
					return fmt.Errorf("claim %s request %s reserves a bad amount of memory", uid, name)
				}
				for size, n := range nm.HugePages {
					if size <= 0 || n < 0 || n > maxBytes/1024/size {
						return fmt.Errorf("claim %s request %s reserves a bad number of hugepages", uid, name)
					}
				}
			}
		}
	}
	return nil
}

// encodeClaims builds the file from each claim's encoding (see
// Driver.enc), so that a Prepare re-encodes its own claim only.
func encodeClaims(enc map[string][]byte) []byte {
	size := 32
	for uid, e := range enc {
		size += len(uid) + len(e) + 8
	}
	out := make([]byte, 0, size)
	out = append(out, `{"version":`...)
	out = strconv.AppendInt(out, claimsVersion, 10)
	out = append(out, `,"claims":{`...)
	for i, uid := range slices.Sorted(maps.Keys(enc)) {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, uid)
		out = append(out, ':')
		out = append(out, enc[uid]...)
	}
	return append(out, "}}\n"...)
}

// save writes the file as of generation gen, unless the file already holds
// that generation or a newer one.
func (s *store) save(gen uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen <= s.written {
		return nil
	}
	if err := s.replace(s.path, data, false); err != nil {
		return fmt.Errorf("saving DRA claims: %w", err)
	}
	s.written, s.synced = gen, false
	return nil
}

// sync makes the last write durable.
func (s *store) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced || s.written == 0 {
		return nil
	}
	if err := atomicfile.Sync(s.path); err != nil {
		return fmt.Errorf("syncing DRA claims: %w", err)
	}
	s.synced = true
	return nil
}

// setLocked replaces (c nil: removes) a claim and its tokens.
func (d *Driver) setLocked(uid string, c *Claim) {
	if old, ok := d.claims[uid]; ok {
		for _, r := range old.Requests {
			delete(d.byToken, r.Token)
		}
		d.claimed = d.claimed.Difference(old.cpus())
	}
	if c == nil {
		delete(d.claims, uid)
		delete(d.enc, uid)
		return
	}
	d.claims[uid] = c
	for name, r := range c.Requests {
		d.byToken[r.Token] = tokenRef{uid, name}
	}
	d.claimed = d.claimed.Union(c.cpus())
	d.encodeLocked(uid)
}

// encodeLocked makes a claim's JSON for the file.
func (d *Driver) encodeLocked(uid string) {
	data, err := json.Marshal(d.claims[uid])
	if err != nil {
		panic(fmt.Sprintf("encoding claim %s: %v", uid, err)) // plain strings, ints and maps
	}
	d.enc[uid] = data
}

// save writes the claims as they are now.
func (d *Driver) save() error {
	d.mu.Lock()
	gen, data := d.gen, encodeClaims(d.enc)
	d.mu.Unlock()
	return d.store.save(gen, data)
}

func (d *Driver) snapshotLocked() map[string]*Claim {
	out := make(map[string]*Claim, len(d.claims))
	for uid, c := range d.claims {
		out[uid] = c.clone()
	}
	return out
}

// Claims returns a copy of the prepared claims, by UID.
func (d *Driver) Claims() map[string]*Claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshotLocked()
}
