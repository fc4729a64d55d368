package plugin

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// EnvGrant carries the token of a kubelet allocation of cpupool.dev/exclusive
// from the device plugin's Allocate response to CreateContainer. The token
// is random and remembered by the daemon with the CPUs it stands for, so a
// tenant cannot forge it: the CPUs come from the daemon's memory, never from
// the container, and a token is bound to the first container that shows it.
const EnvGrant = "CPUPOOL_GRANT"

// maxGrantValue bounds what is parsed of a tenant-visible env value.
const maxGrantValue = 64

// grant is one kubelet allocation: CPUs, and once a container showed the
// token, the container it belongs to (kept across container restarts, which
// reuse the kubelet's cached Allocate response). A grant with a pod and no
// container is its pod's but not shown yet: a container of that pod bound
// a newer token for the same CPUs (see bindGrant).
type grant struct {
	CPUs string `json:"cpus"`
	// Seq orders the allocations: a larger Seq was made later. 0 for
	// grants written before Seq existed (older than any that has one).
	Seq       uint64 `json:"seq,omitempty"`
	PodUID    string `json:"podUID,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
}

// grants are the kubelet's allocations the daemon knows of, by token, kept
// in a small file next to the state file so that a restarted daemon still
// recognises containers the kubelet restarts. byToken and gen change only
// under the plugin's lock.
type grants struct {
	byToken map[string]grant
	// seq is the largest grant.Seq given so far.
	seq uint64
	// gen counts the changes to byToken: it orders the copies that reach
	// the file, so that an older map never replaces a newer one.
	gen  uint64
	file *grantsFile
}

// grantsSnapshot is a copy of the grants as of one generation, taken under
// the plugin's lock and written without it.
type grantsSnapshot struct {
	gen     uint64
	byToken map[string]grant
}

// GrantsFile is the grants file for a state file.
func GrantsFile(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), "kubelet-grants.json")
}

// errGrantsDiscarded wraps the reason a grants file could not be used; the
// grants start empty.
var errGrantsDiscarded = errors.New("kubelet grants file discarded")

// loadGrants reads the grants file. A missing file is no grants. A file
// that is not a map from token to CPUs (empty, torn, edited by hand), or
// that cannot be read (EIO, EACCES), is treated as the state file is
// (atomicfile.Load): renamed to <path>.corrupt-<time> or
// <path>.unreadable-<time>, and the grants start empty with an error
// wrapping errGrantsDiscarded, for the caller to log and count. When it
// cannot be renamed (a read-only state directory), it stays as it is and
// no write replaces it until it is moved aside (grantsFile.save). The
// error is never another: the grants file, loaded on every node, device
// plugin or not, must not stop the daemon and with it all pinning.
// Synchronize then makes the grants of running containers again
// from the runtime (see rebindGrants); an allocation no container had
// shown yet is lost, and its container is refused until the kubelet
// re-creates the pod.
func loadGrants(path string, now time.Time) (*grants, error) {
	return loadGrantsFile(newGrantsFile(path), now)
}

// loadGrantsFile is loadGrants with the file to read and write (tests set
// its rename).
func loadGrantsFile(file *grantsFile, now time.Time) (*grants, error) {
	g := &grants{byToken: map[string]grant{}, file: file}
	discarded := atomicfile.Load(file.path, now, g.file.rename, func(data []byte) error {
		return decodeGrants(data, g.byToken)
	})
	if discarded == nil {
		for _, gr := range g.byToken {
			g.seq = max(g.seq, gr.Seq)
		}
		return g, nil
	}
	clear(g.byToken)
	if discarded.Unmoved != nil {
		g.file.unmoved = discarded
	}
	return g, fmt.Errorf("%w: %v; rebuilding the grants of running containers from the runtime", errGrantsDiscarded, discarded)
}

// decodeGrants fills byToken from the file's content, or says what is wrong
// with it.
func decodeGrants(data []byte, byToken map[string]grant) error {
	var m map[string]grant
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("not valid JSON (truncated?): %w", err)
	}
	if m == nil {
		return fmt.Errorf("not a map from token to grant")
	}
	for tok, gr := range m {
		if len(tok) == 0 || len(tok) > maxGrantValue {
			return fmt.Errorf("token %s is not a grant token", cpulist.Echo(tok))
		}
		if cpus, err := cpulist.Parse(gr.CPUs); err != nil || cpus.IsEmpty() {
			return fmt.Errorf("grant %s… has no CPUs (%s)", tok[:min(8, len(tok))], cpulist.Echo(gr.CPUs))
		}
		byToken[tok] = gr
	}
	return nil
}

// changed notes a change to byToken; the caller tells whoever writes it.
func (g *grants) changed() { g.gen++ }

// add records a new grant, the newest, and notes the change.
func (g *grants) add(tok string, gr grant) {
	g.seq++
	gr.Seq = g.seq
	g.byToken[tok] = gr
	g.changed()
}

// remove forgets a grant; the caller notes the change.
func (g *grants) remove(tok string) { delete(g.byToken, tok) }

// trimUnbound forgets the oldest grants that no running pod holds while
// there are more than limit of them, and returns their CPUs. A grant no
// pod has claimed counts, and so does one whose pod is absent (absent
// says so: a pod the runtime did not report at Synchronize, such as after
// a reboot that emptied the runtime, or whose sandbox stopped). Grants no
// pod claimed go first, oldest first, then those of absent pods, oldest
// first: an absent pod may still be re-created by the kubelet with its
// checkpointed tokens. Forgetting one changes the grants.
func (g *grants) trimUnbound(limit int, absent func(grant) bool) []string {
	var unbound []string
	for tok, gr := range g.byToken {
		if gr.PodUID == "" || absent(gr) {
			unbound = append(unbound, tok)
		}
	}
	if len(unbound) <= limit {
		return nil
	}
	claimed := func(tok string) bool { return g.byToken[tok].PodUID != "" }
	slices.SortFunc(unbound, func(a, b string) int {
		return cmp.Or(compareBool(claimed(a), claimed(b)), cmp.Compare(g.byToken[a].Seq, g.byToken[b].Seq), strings.Compare(a, b))
	})
	var dropped []string
	for _, tok := range unbound[:len(unbound)-limit] {
		dropped = append(dropped, g.byToken[tok].CPUs)
		g.remove(tok)
	}
	g.changed()
	return dropped
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// snapshot copies the grants for the file (a map of at most one entry per
// exclusive CPU).
func (g *grants) snapshot() grantsSnapshot {
	return grantsSnapshot{gen: g.gen, byToken: maps.Clone(g.byToken)}
}

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b)
}

// cpusOf returns a grant's CPUs.
func (gr grant) cpusOf() cpuset.CPUSet {
	s, err := cpuset.Parse(gr.CPUs)
	if err != nil {
		return cpuset.New()
	}
	return s
}

// grantToken finds the token in a container's environment: the last value
// of EnvGrant (the runtime's env, as the kubelet built it, with the device
// plugin's variables). Values are bounded before anything else looks at them.
func grantToken(env []string) (string, bool, error) {
	var found []string
	for _, e := range env {
		k, v, ok := strings.Cut(e, "=")
		if ok && k == EnvGrant {
			found = append(found, v)
		}
	}
	switch {
	case len(found) == 0:
		return "", false, nil
	case len(found) > 1:
		return "", true, fmt.Errorf("%s is set %d times; it is set by the kubelet's allocation of the resource and must not be set in the pod spec", EnvGrant, len(found))
	}
	v := found[0]
	if len(v) > maxGrantValue {
		v = v[:maxGrantValue]
		return "", true, fmt.Errorf("%s=%q...: not a grant token", EnvGrant, v[:16])
	}
	return v, true, nil
}
