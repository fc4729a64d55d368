package plugin

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"
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
// a token for the same CPUs (see bindGrant).
type grant struct {
	CPUs      string `json:"cpus"`
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
	// born is the generation at which this process added each grant (0
	// for grants read from the file): the age of unbound grants, the
	// oldest of which go first when there are too many.
	born map[string]uint64
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

func loadGrants(path string) (*grants, error) {
	g := &grants{byToken: map[string]grant{}, born: map[string]uint64{}, file: newGrantsFile(path)}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return g, nil
	case err != nil:
		return nil, fmt.Errorf("reading kubelet grants: %w", err)
	}
	if err := json.Unmarshal(data, &g.byToken); err != nil {
		return nil, fmt.Errorf("kubelet grants %s: %w (move it aside to start over; containers of the cpupool.dev/exclusive resource are then re-admitted only when their pods are recreated)", path, err)
	}
	if g.byToken == nil {
		g.byToken = map[string]grant{}
	}
	return g, nil
}

// changed notes a change to byToken; the caller tells whoever writes it.
func (g *grants) changed() { g.gen++ }

// add records a new grant and notes the change.
func (g *grants) add(tok string, gr grant) {
	g.changed()
	g.byToken[tok] = gr
	g.born[tok] = g.gen
}

// remove forgets a grant; the caller notes the change.
func (g *grants) remove(tok string) {
	delete(g.byToken, tok)
	delete(g.born, tok)
}

// trimUnbound forgets the oldest grants that no pod has claimed while there
// are more than limit of them, and returns their CPUs. Forgetting one
// changes the grants.
func (g *grants) trimUnbound(limit int) []string {
	var unbound []string
	for tok, gr := range g.byToken {
		if gr.PodUID == "" {
			unbound = append(unbound, tok)
		}
	}
	if len(unbound) <= limit {
		return nil
	}
	slices.SortFunc(unbound, func(a, b string) int {
		return cmp.Or(cmp.Compare(g.born[a], g.born[b]), strings.Compare(a, b))
	})
	var dropped []string
	for _, tok := range unbound[:len(unbound)-limit] {
		dropped = append(dropped, g.byToken[tok].CPUs)
		g.remove(tok)
	}
	g.changed()
	return dropped
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
