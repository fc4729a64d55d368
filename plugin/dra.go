package plugin

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// The DRA route to the exclusive pools: the cpupool.dev driver (package
// dra) prepares the scheduler's claims, choosing their CPUs here (Place)
// over what no container holds (Held), and the runtime applies the claim's
// CDI spec, whose variable carries a token. At CreateContainer the
// container that shows the token is bound to the claim and pinned to
// exactly its CPUs, as a device plugin grant's container is.

var _ dracore.Pools = (*Plugin)(nil)

// ClaimBinder finds the CPUs of the DRA claims a container shows (the
// dra.Driver), lists the prepared requests no container has shown yet
// (a reload must leave their CPUs in their pools), and names the prepared
// request, bound or not, that has some of a set of CPUs, or may get them
// in the placement under way (PreparedOn: a device plugin grant must not
// take them, see claimOnGrant; running: for a container the runtime
// runs already, which a claim remembered from before a restart and not
// prepared again since does not beat). Lookup
// changes nothing and Commit binds what it found, once the container is
// placed; Bind is both, for a container that runs already.
type ClaimBinder interface {
	Lookup(env []string, ctr dracore.Container) (dracore.Grant, bool, error)
	Commit(g dracore.Grant, ctr dracore.Container)
	Bind(env []string, ctr dracore.Container) (dracore.Grant, bool, error)
	Pending() []dracore.Pending
	PreparedOn(cpus cpuset.CPUSet, running bool) (claim string, on cpuset.CPUSet, maybe bool)
}

// UseClaims turns the DRA route on: containers that show claim tokens get
// their claims' CPUs. Call it before Run.
func (p *Plugin) UseClaims(b ClaimBinder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.claims = b
}

// Layout implements dracore.Pools.
func (p *Plugin) Layout() (*sysfs.Topology, *allocator.Layout) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.topo, p.alloc.Layout()
}

// Synced implements dracore.Pools: until the runtime's first Synchronize
// the allocator knows no container (the state file is a memory, the
// runtime the truth), so every CPU would look free to Place and Held.
// Pinning does not wait for it: CreateContainer places as ever.
func (p *Plugin) Synced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// Held implements dracore.Pools: the CPUs of an exclusive pool that a
// container, running or stopped and held for its pod, keeps from others.
func (p *Plugin) Held(pool string) cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alloc.Layout().Pool(pool).Difference(p.alloc.FreeCPUs(pool))
}

// Place implements dracore.Pools with the plugin's allocator: the placement
// rules see every container's CPUs.
func (p *Plugin) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return dracore.PlaceOn(p.alloc, p.cfg.Allocation, pool, numa, n, exclude)
}

// Release implements dracore.Pools: the kubelet unprepared the claims of these
// pods, which it does once their containers have ended, so the CPUs held
// for their stopped containers go back now. The pod sandbox's stop would
// release them too, but containerd sends none for pods created before its
// own restart, and the scheduler has already given the claim's CPUs away.
// A pod that still runs a container keeps its holds.
func (p *Plugin) Release(pods []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	running := map[string]bool{}
	for _, a := range p.alloc.Assignments() {
		running[a.Pod.UID] = true
	}
	released := false
	for _, uid := range pods {
		if running[uid] || len(p.alloc.HoldsOf(uid)) == 0 {
			continue
		}
		_, res := p.alloc.ReleasePod(uid)
		p.recordRelease(res)
		p.deferFollowers(res)
		p.log.Infof("pod %s: its ResourceClaims were unprepared; CPUs held for its stopped containers released", uid)
		released = true
	}
	if released {
		p.stateChanged()
	}
}

// attachClaims fills in the CPUs of the DRA claims the container shows, if
// its environment carries claim tokens. A token the driver does not know,
// of a claim reserved for other pods, or of a request another container
// uses is refused. A container cannot show a device plugin grant as well.
//
// Like attachGrant it binds nothing: a creation that fails binds nothing.
// The container owns the requests once it is placed (bindClaims); the
// caller undoes the lent memory of a creation refused after this
// (detachClaims). The claims' memory is lent to it here already, because
// the allocator's decision counts the container's memory from their
// reservations first (numamem's LendClaims, by container).
func (p *Plugin) attachClaims(pod *api.PodSandbox, ctr *api.Container, info *allocator.Container) (claimBinding, error) {
	if p.claims == nil {
		return claimBinding{}, nil
	}
	who := dracore.Container{PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(), Name: ctr.GetName()}
	g, ok, err := p.claims.Lookup(ctr.GetEnv(), who)
	if err != nil || !ok {
		return claimBinding{}, err
	}
	if info.KubeletCPUs.Size() > 0 {
		return claimBinding{}, fmt.Errorf("the container shows both a %s grant and ResourceClaims (%v); it gets its exclusive CPUs one way", EnvGrant, g.Claims)
	}
	info.KubeletCPUs, info.KubeletPool, info.Claims = g.CPUs, g.Pool, g.Claims
	return claimBinding{shown: true, grant: g, ctr: who, lent: p.bindClaimMemory(g.Keys, who.PodUID, who.Name)}, nil
}

// claimBinding is what attachClaims found for a container being placed:
// its claims' requests, to bind once it is placed, and the owners their
// memory had before it was lent to the container, to give back if not.
type claimBinding struct {
	shown bool // the container shows claim tokens
	bound bool // bindClaims bound it
	grant dracore.Grant
	ctr   dracore.Container
	lent  []claimOwner
}

// bindClaims binds a placed container to the requests of its claims, if
// it shows any.
func (p *Plugin) bindClaims(b *claimBinding) {
	if b.shown {
		p.claims.Commit(b.grant, b.ctr)
		b.bound = true
	}
}

// detachClaims gives the claims' memory back to the owners it had before
// attachClaims lent it to a container that was then not placed (deferred
// by the callers: a container that was placed, or shows no claim, keeps
// what it has).
func (p *Plugin) detachClaims(b *claimBinding) {
	if !b.shown || b.bound {
		return
	}
	for _, o := range b.lent {
		p.alloc.BindClaim(o.key, o.podUID, o.container)
		c := p.claimMemory[o.key]
		c.PodUID, c.Container = o.podUID, o.container
		p.claimMemory[o.key] = c
	}
}

// claimsShown tells whether a container's environment carries claim
// tokens (the container's CPUs are then its claims', which a resize of
// its CPU request cannot change).
func claimsShown(env []string) bool {
	tokens, err := dracore.Tokens(env)
	return err != nil || len(tokens) > 0
}
