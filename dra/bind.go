package dra

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"
)

// Bind is Lookup and Commit in one: it finds the claims a container shows
// and binds it to them. The plugin uses it for a container that runs
// already (the runtime's Synchronize reports it with its variables); a
// container being created is looked up first and bound only once it is
// placed (Lookup, then Commit), so that a creation refused after the
// lookup takes nothing.
//
// A binding is made in memory; keepWritten writes it in the background,
// retrying a failed write. A binding lost to a kill -9 before that write
// is made again at the runtime's Synchronize, which reports the running
// container with its variables (the plugin binds the claims of the
// containers it knows before it places any other), and by the same
// container, which the kubelet re-creates with the same variables.
func (d *Driver) Bind(env []string, ctr Container) (Grant, bool, error) {
	g, ok, err := d.Lookup(env, ctr)
	if err != nil || !ok {
		return g, ok, err
	}
	d.Commit(g, ctr)
	return g, true, nil
}

// Lookup finds the claims a container shows in its environment (see
// Tokens) and the CPUs they give it, and changes nothing. The first
// container that shows a request's token owns the request (Commit): any
// other container, of the pod or of another pod, is refused, and a pod
// the claim was not reserved for when it was prepared gets nothing from a
// request nobody owns yet. A container may show several requests (of one
// claim or several) of one pool; it gets all their CPUs. ok is false when
// the environment shows no token.
func (d *Driver) Lookup(env []string, ctr Container) (g Grant, ok bool, err error) {
	tokens, err := Tokens(env)
	if err != nil {
		return Grant{}, true, err
	}
	if len(tokens) == 0 {
		return Grant{}, false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	g.CPUs = cpuset.New()
	for _, tok := range tokens {
		ref, known := d.byToken[tok]
		if !known {
			return Grant{}, true, d.unknownToken(env, tok)
		}
		c := d.claims[ref.claim]
		r := c.Requests[ref.request]
		name := c.Namespace + "/" + c.Name + "/" + ref.request
		// A request bound to another container is refused as such before
		// the pods are looked at: the kubelet prepares a claim once on a
		// node, so a second pod sharing it (a resourceClaimName claim) is
		// not among the pods recorded at that Prepare, and "reserved for
		// other pods" would hide why it gets nothing.
		if r.PodUID != "" && (r.PodUID != ctr.PodUID || r.Container != ctr.Name) {
			return Grant{}, true, fmt.Errorf("claim %s/%s request %s already gives its CPUs to container %s of pod %s; a request of %s gives its CPUs to one container: give each container its own claim (a ResourceClaimTemplate) or its own request (resources.claims[].request)",
				c.Namespace, c.Name, ref.request, r.Container, r.PodUID, DriverName)
		}
		// A token of a request nobody uses yet, shown by a pod the claim
		// was not reserved for at Prepare: a copied variable, a CDI device
		// named by annotation.
		if !slices.Contains(c.Pods, ctr.PodUID) {
			return Grant{}, true, fmt.Errorf("claim %s/%s is reserved for other pods (%s), not for pod %s/%s (%s); its CPUs cannot be used here",
				c.Namespace, c.Name, strings.Join(c.Pods, ", "), ctr.Namespace, ctr.Pod, ctr.PodUID)
		}
		if g.Pool != "" && g.Pool != r.Pool {
			return Grant{}, true, fmt.Errorf("container %s uses claims of pools %s and %s (%s); a container's exclusive CPUs come from one pool", ctr, g.Pool, r.Pool, strings.Join(append(g.Claims, name), ", "))
		}
		g.Pool = r.Pool
		g.CPUs = g.CPUs.Union(r.CPUSet())
		g.Claims = append(g.Claims, name)
		g.Keys = append(g.Keys, memoryKey(ref.claim, ref.request))
	}
	g.Tokens = tokens
	return g, true, nil
}

// Commit binds the container to the requests of a grant Lookup gave it,
// once the plugin placed it: each request no container owns yet is its
// own from now on. The plugin looks up and commits under its lock, which
// every binding is made under, so no other container can take a request
// in between; a Prepare or Unprepare can, by replacing the claim, and a
// token it made unknown is left as it is (the container runs on the CPUs
// it was given; the claim's new CPUs are its next container's).
//
// A container showing a token proves answered the requests of its claim
// marked unanswered (Request.Unanswered) whose tokens are as old as it or
// older (see Claim.answeredBy): it got the token from a CDI spec written
// once a Prepare passed its last look, and that spec carried their tokens
// too. Their marks are cleared, in memory and with the background
// writer's next write in the file, and with no request marked left the
// claim is no longer unconfirmed: the kubelet never prepares an answered
// claim again, so nothing else would clear them, and every later restart
// would hold its requests no container is bound to yet as unconfirmed. A
// request placed anew by a later Prepare than the token's stays marked:
// the kubelet may never have got its new token. A request bound already
// (a running container bound again at a Synchronize) proves the same.
func (d *Driver) Commit(g Grant, ctr Container) {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for _, tok := range g.Tokens {
		ref, known := d.byToken[tok]
		if !known {
			d.log.Warnf("DRA: container %s: a claim it showed was prepared again or unprepared while it was placed; not bound to it", ctr)
			continue
		}
		c := d.claims[ref.claim]
		r := c.Requests[ref.request]
		bound := r.PodUID == ""
		if bound {
			r.PodUID, r.Container = ctr.PodUID, ctr.Name
		}
		if cleared := c.answeredBy(ref.request); !bound && !cleared {
			continue
		}
		if !c.unanswered() {
			delete(d.unconfirmed, ref.claim)
		}
		d.encodeLocked(ref.claim)
		changed = true
	}
	if changed {
		d.gen++
		d.signal(d.dirty)
	}
}

// Pending lists the requests of the prepared claims that no container has
// shown yet, by claim and request name: the plugin refuses a config reload
// that would take their CPUs out of their pool. Bound requests are their
// containers' (running, or held for their pods), which the reload checks
// as such.
func (d *Driver) Pending() []Pending {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Pending
	for _, uid := range slices.Sorted(maps.Keys(d.claims)) {
		c := d.claims[uid]
		for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
			if r := c.Requests[name]; r.PodUID == "" {
				out = append(out, Pending{Claim: c.Namespace + "/" + c.Name + "/" + name, Pods: slices.Clone(c.Pods), Pool: r.Pool, CPUs: r.CPUSet()})
			}
		}
	}
	return out
}
