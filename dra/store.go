package dra

// The claim store: the prepared claims in memory (by UID, with their
// tokens and the CPUs they hold), each kept encoded for the claims file,
// and that file, written atomically so that a restart finds every claim
// the kubelet was told is prepared.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/cpuset"

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
	// rename moves an unusable file aside: os.Rename, which tests
	// replace to fail.
	rename atomicfile.Rename
	// unmoved is the file load could not use nor move aside (a
	// read-only state directory): save moves it aside before it writes,
	// and writes nothing until it has, so that a file that could not be
	// read is never replaced by the claims prepared since. Nil when
	// there is none.
	unmoved *atomicfile.Discarded
	// leftUnmoved is unmoved != nil, read without mu by the refusal of
	// an unknown token (Driver.unknownToken), which must not wait for a
	// write.
	leftUnmoved atomic.Bool
	// failures counts the writes that failed, by any writer
	// (cpupool_dra_claims_write_errors_total).
	failures atomic.Uint64
}

func newStore(path string) *store {
	return &store{path: path, replace: atomicfile.Replace, rename: os.Rename}
}

// loaded is what load read of a usable claims file besides its claims.
type loaded struct {
	// warnings say what was read of damaged fields, and what was
	// dropped, each naming the file, the claim and the field.
	warnings []string
	// dropped are the claims of the file that could not be kept, by
	// their requests' tokens: what to say when a container shows one
	// (see Driver.unknownToken).
	dropped map[string]droppedClaim
}

// droppedClaim is a claim of the file load dropped.
type droppedClaim struct {
	// claim names it ("claim <uid> (ns/name)"), why says why.
	claim, why string
}

// load reads the claims file. A missing file is no claims. A file that
// cannot be parsed, or cannot be read at all (EIO, EACCES), is set aside
// as the state file is (atomicfile.Load: moved to .corrupt-<time> or
// .unreadable-<time>, or left as it is until save can move it), and the
// driver starts with no claims, described by the Discarded returned: the
// claims file must never stop the daemon, and with it all pinning.
// The kubelet prepares again the claims of pods it starts, and a
// claim whose container runs is refused nothing (its CPUs stay held by the
// container); the containers of the claims lost are refused (see
// Driver.unknownToken).
//
// One claim's damaged field does not cost the file: a bad mark or
// Prepare number is read on the safe side (readMarks), and a claim whose
// CPUs are no CPU list is dropped alone (dropBadCPUs), each said in the
// warnings returned.
func (s *store) load(now time.Time) (map[string]*Claim, loaded, *atomicfile.Discarded) {
	var claims map[string]*Claim
	var got loaded
	discarded := atomicfile.Load(s.path, now, s.rename, func(data []byte) error {
		// The version first: a file of another schema (a downgrade) is
		// refused for it, not for a field that schema writes otherwise,
		// as if edited or damaged.
		var version struct {
			Version int `json:"version"`
		}
		if err := json.Unmarshal(data, &version); err != nil {
			return err
		}
		if version.Version != claimsVersion {
			return fmt.Errorf("schema version %d, this daemon reads %d", version.Version, claimsVersion)
		}
		var doc struct {
			Claims map[string]*claimOnLoad `json:"claims"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return err
		}
		got = loaded{dropped: map[string]droppedClaim{}}
		warn := func(w string) { got.warnings = append(got.warnings, w) }
		claims = make(map[string]*Claim, len(doc.Claims))
		for _, uid := range slices.Sorted(maps.Keys(doc.Claims)) {
			if c := doc.Claims[uid]; c == nil {
				claims[uid] = nil // refused by checkClaims
			} else {
				claims[uid] = c.readMarks(s.path, uid, warn)
			}
		}
		if err := checkClaims(claims); err != nil {
			return err
		}
		dropBadCPUs(s.path, claims, got.dropped, warn)
		return nil
	})
	if discarded != nil {
		if discarded.Unmoved != nil {
			s.unmoved = discarded
			s.leftUnmoved.Store(true)
		}
		return map[string]*Claim{}, loaded{}, discarded
	}
	if claims == nil {
		claims = map[string]*Claim{}
	}
	for _, c := range claims {
		c.loadMarks()
	}
	return claims, got, nil
}

// dropBadCPUs drops the claims with a request whose CPUs are no CPU list
// (a file edited by hand or damaged): read as no CPUs (Request.CPUSet),
// such a list would hold the claim's CPUs against nothing, and no other
// reading of it is safe. The other claims are kept. The dropped claim's
// tokens are recorded in dropped, so that its container is told why its
// token is refused, and what to do.
func dropBadCPUs(path string, claims map[string]*Claim, dropped map[string]droppedClaim, warn func(string)) {
	for _, uid := range slices.Sorted(maps.Keys(claims)) {
		c := claims[uid]
		for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
			r := c.Requests[name]
			if _, err := cpuset.Parse(r.CPUs); err == nil {
				continue
			}
			claim := fmt.Sprintf("claim %s (%s/%s)", echo(uid), echo(c.Namespace), echo(c.Name))
			why := fmt.Sprintf(`its request %s's "cpus" %q are no CPU list (the file was edited or damaged)`, echo(name), echo(r.CPUs))
			warn(fmt.Sprintf("DRA claims file %s: %s: %s: the claim is dropped, the others are kept; its containers are refused: delete its pod (the kubelet unprepares the claim and prepares that of the new pod; see docs/troubleshooting.md)",
				path, claim, why))
			for _, r := range c.Requests {
				dropped[r.Token] = droppedClaim{claim: claim, why: why}
			}
			delete(claims, uid)
			break
		}
	}
}

// checkClaims refuses a file whose entries are incomplete or bad.
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
	if err := s.unmoved.Move(s.rename); err != nil {
		s.failures.Add(1)
		return fmt.Errorf("saving DRA claims: %w", err)
	}
	s.unmoved = nil
	s.leftUnmoved.Store(false)
	if err := s.replace(s.path, data, false); err != nil {
		s.failures.Add(1)
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
// A claim remembered from the file is no longer unconfirmed once a
// Prepare (or its take-back, or an Unprepare) set its record.
func (d *Driver) setLocked(uid string, c *Claim) {
	delete(d.unconfirmed, uid)
	old, replaced := d.claims[uid]
	if replaced {
		for _, r := range old.Requests {
			delete(d.byToken, r.Token)
		}
	}
	if c == nil {
		delete(d.claims, uid)
		delete(d.enc, uid)
	} else {
		d.claims[uid] = c
		for name, r := range c.Requests {
			d.byToken[r.Token] = tokenRef{uid, name}
		}
		d.encodeLocked(uid)
	}
	if !replaced {
		if c != nil {
			d.claimed = d.claimed.Union(c.cpus())
		}
		return
	}
	// Taking the old claim's CPUs out of claimed would assume no other
	// claim has one of them, which does not hold for a moment: a failed
	// write's undo puts claims back one by one, in a map's order, and a
	// claim may be back on CPUs another claim being taken back still has.
	// A CPU taken out then is missing from claimed for good, and
	// PreparedOn and the next placement take it for free. Claims are
	// few: claimed is made again from all of them.
	d.claimed = cpuset.New()
	for _, other := range d.claims {
		d.claimed = d.claimed.Union(other.cpus())
	}
}

// answered clears the unanswered mark of these claims, whose kubelet call
// passed its last look and is told they are prepared while the kubelet
// still waits for the answer (PrepareResourceClaims looks at the call's
// context first; see there for the moment that look cannot cover): the
// claims file gets it with the background writer's next write,
// coalesced, off the reply path. A kill -9 before that write leaves the mark, and the
// restarted driver holds the claim unconfirmed as if the kubelet had not
// been answered: its own container, bound, still beats any other, and
// its next Prepare, if any, confirms it.
func (d *Driver) answered(uids []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cleared := false
	for _, uid := range uids {
		if c := d.claims[uid]; c != nil && c.unanswered() {
			c.answerAll()
			d.encodeLocked(uid)
			cleared = true
		}
	}
	if cleared {
		d.gen++
		d.signal(d.dirty)
	}
}

// logSharedLocked says loudly, at load, that claim c (uid) has CPUs a
// claim loaded before it has: claims never share a CPU, so the file was
// written by hand or by a defect, and each claim's container would run on
// CPUs the other's has. Both are kept (the kubelet holds both as
// prepared); the operator is told which to deallocate.
func (d *Driver) logSharedLocked(uid string, c *Claim) {
	shared := d.claimed.Intersection(c.cpus())
	if shared.IsEmpty() {
		return
	}
	for _, other := range slices.Sorted(maps.Keys(d.claims)) {
		o := d.claims[other]
		if on := o.cpus().Intersection(shared); !on.IsEmpty() {
			d.log.Errorf("DRA claims file: claims %s/%s and %s/%s (%s, %s) share CPUs %s; claims never share a CPU: delete the pods of one of them",
				o.Namespace, o.Name, c.Namespace, c.Name, other, uid, on)
		}
	}
}

// encodeLocked makes a claim's JSON for the file, its claim's mark
// (read by the release before) set when a request's is.
func (d *Driver) encodeLocked(uid string) {
	c := d.claims[uid]
	c.Unanswered = c.unanswered()
	data, err := json.Marshal(c)
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
