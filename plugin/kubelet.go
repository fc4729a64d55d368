package plugin

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/deviceplugin"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// The kubelet route to the exclusive pool: the device plugin advertises one
// device per exclusive CPU, the kubelet allocates devices to a container
// (Grant), and CreateContainer pins the container to exactly those CPUs.

var _ deviceplugin.Pool = (*Plugin)(nil)

// Changed is signalled after every decision, so that the device plugin
// re-reads Devices.
func (p *Plugin) Changed() <-chan struct{} { return p.changed }

// notify tells the device plugin that the devices may have changed. Never
// blocks: one pending signal covers any number of changes.
func (p *Plugin) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Devices lists the exclusive pool's CPUs. A CPU held by a container the
// kubelet did not allocate it to (an exclusive container from before the
// device plugin was turned on, or restored where it ran) is not free to
// give: it is reported unhealthy, which keeps it out of allocatable.
//
// Before the runtime's first Synchronize the plugin does not know which
// containers hold CPUs: every CPU is reported unhealthy, so that the
// kubelet allocates none and its capacity stays (an empty list would
// take the resource's capacity to 0 and back at each restart), except
// the CPUs of the grants the grants file recorded. Those the kubelet has
// already allocated, and it re-admits their pods (after a node reboot or
// a kubelet restart, their containers not running) only while every
// previously allocated device is healthy: an unhealthy one fails the pod
// with UnexpectedAdmissionError, and it is not retried. They are the
// kubelet's to account for (as after Synchronize: see kubelets below), so
// reporting them healthy gives no container's CPU away; Grant still
// refuses every CPU until the first Synchronize. No pod is absent before
// it (grantOfAbsentPod), so every recorded grant counts.
func (p *Plugin) Devices() []deviceplugin.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.synced {
		recorded := cpuset.New()
		for _, g := range p.grants.byToken {
			recorded = recorded.Union(g.cpusOf())
		}
		excl := p.alloc.Layout().Exclusive
		out := make([]deviceplugin.Device, 0, excl.Size())
		for _, cpu := range excl.List() {
			out = append(out, deviceplugin.Device{ID: strconv.Itoa(cpu), NUMA: p.numaOf(cpu), Healthy: recorded.Contains(cpu)})
		}
		return out
	}
	granted := map[string]cpuset.CPUSet{} // "<pod uid>/<container>" -> CPUs
	for _, g := range p.grants.byToken {
		if g.PodUID != "" {
			granted[g.PodUID+"/"+g.Container] = g.cpusOf()
		}
	}
	kubelets := p.kubeletCPUs()
	notFree := cpuset.New()
	holders := p.alloc.Assignments()
	for _, h := range p.alloc.Holds() {
		holders = append(holders, h.Assignment)
	}
	for _, a := range holders {
		if a.Pool != pools.Exclusive {
			continue
		}
		if cpus, ok := granted[a.Pod.UID+"/"+a.Container]; ok && a.Held().IsSubsetOf(cpus) {
			continue
		}
		notFree = notFree.Union(a.Held().Difference(kubelets))
	}
	excl := p.alloc.Layout().Exclusive
	out := make([]deviceplugin.Device, 0, excl.Size())
	for _, cpu := range excl.List() {
		out = append(out, deviceplugin.Device{ID: strconv.Itoa(cpu), NUMA: p.numaOf(cpu), Healthy: !notFree.Contains(cpu)})
	}
	return out
}

// kubeletCPUs are the CPUs the kubelet accounts for: those of its grants,
// even while the container of an ending pod still runs on them. A grant
// kept for a pod the runtime does not run (keepAbsentGrants) holds no CPU
// and is left out: a container the kubelet did not allocate its CPUs to
// may hold them meanwhile (one placed while the device plugin was off),
// and they must stay unhealthy in Devices and refused by Grant. Called
// under the lock.
func (p *Plugin) kubeletCPUs() cpuset.CPUSet {
	kubelets := cpuset.New()
	for _, g := range p.grants.byToken {
		if !p.grantOfAbsentPod(g) {
			kubelets = kubelets.Union(g.cpusOf())
		}
	}
	return kubelets
}

// parseDeviceIDs turns the kubelet's device ids into CPUs of the exclusive
// pool.
func (p *Plugin) parseDeviceIDs(ids []string) (cpuset.CPUSet, error) {
	cpus := make([]int, 0, len(ids))
	excl := p.alloc.Layout().Exclusive
	for _, id := range ids {
		cpu, err := strconv.Atoi(id)
		if err != nil || !excl.Contains(cpu) {
			if len(id) > 16 {
				id = id[:16] + "..."
			}
			return cpuset.New(), fmt.Errorf("device %q is not a CPU of the exclusive pool (%s)", id, excl)
		}
		cpus = append(cpus, cpu)
	}
	return cpuset.New(cpus...), nil
}

// Preferred applies the allocator's placement rules to the kubelet's
// choice: fewest NUMA nodes, whole cores, fewest L3 groups.
func (p *Plugin) Preferred(available, mustInclude []string, size int) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	avail, err := p.parseDeviceIDs(available)
	if err != nil {
		return nil, err
	}
	must, err := p.parseDeviceIDs(mustInclude)
	if err != nil {
		return nil, err
	}
	cpus, err := p.alloc.Preferred(pools.Exclusive, avail, must, size, p.cfg.Allocation)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, cpus.Size())
	for _, c := range cpus.List() {
		out = append(out, strconv.Itoa(c))
	}
	return out, nil
}

// Grant records the kubelet's allocation of CPUs to a container it is about
// to create. It refuses CPUs that a container holds without the kubelet's
// knowledge (advertised unhealthy, so the kubelet does not offer them): the
// kubelet never allocates a CPU an annotated container holds. With the
// DRA driver on it also refuses CPUs a prepared claim has (claimOnGrant).
// CPUs of an
// earlier grant are the kubelet's to give again (unless its pod is absent,
// see kubeletCPUs), and Grant keeps the earlier grant: Allocate does not
// say for which pod it is called, and the earlier grant may be the same
// pod's (the kubelet allocates for every container of
// a pod at admission, init containers first, and an app container reuses
// an init container's devices), so which one stays is decided when a
// container binds its token (see bindGrant). The kubelet also gives CPUs
// again once it considers a pod ended, which can be a moment before its
// container has stopped; the new container's creation then fails until they
// are free, and the kubelet retries it.
//
// Unlike the NRI handlers, Grant writes the grants file itself and fsyncs
// it before it returns the token. The kubelet checkpoints the token with its
// allocation and shows it again for every container it re-creates from
// that allocation, even after a node reboot; a token the daemon forgot
// would get those containers refused. Grant is the device plugin's Allocate
// (a gRPC call from the kubelet before it creates the container), not an
// NRI reply, and it writes without the plugin's lock, so no handler waits
// for that fsync.
func (p *Plugin) Grant(ids []string) (map[string]string, error) {
	g, tok, snap, err := p.grant(ids)
	if err != nil {
		return nil, err
	}
	if err := g.file.save(snap, true); err != nil {
		// Nobody knows the token yet: take it back.
		p.mu.Lock()
		g.remove(tok)
		g.changed()
		p.stateChanged()
		p.mu.Unlock()
		return nil, err
	}
	p.notify()
	return map[string]string{EnvGrant: tok}, nil
}

// grant decides a Grant under the lock: it records the new grant in memory
// and returns the grants with their copy to write.
func (p *Plugin) grant(ids []string) (*grants, string, grantsSnapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.synced {
		// Devices calls every CPU unhealthy until then; the kubelet asks
		// only for healthy ones.
		return nil, "", grantsSnapshot{}, fmt.Errorf("the daemon has not synchronized with the container runtime yet, so it does not know which CPUs running containers hold")
	}
	cpus, err := p.parseDeviceIDs(ids)
	if err != nil {
		return nil, "", grantsSnapshot{}, err
	}
	if cpus.IsEmpty() {
		return nil, "", grantsSnapshot{}, fmt.Errorf("no devices to allocate")
	}
	if held := cpus.Difference(p.alloc.FreeCPUs(pools.Exclusive)).Difference(p.kubeletCPUs()); !held.IsEmpty() {
		return nil, "", grantsSnapshot{}, fmt.Errorf("CPUs %s are held by containers the kubelet did not allocate them to (%s)", held, p.holders(held))
	}
	if err := p.claimOnGrant(cpus, atAllocate(), false); err != nil {
		return nil, "", grantsSnapshot{}, err
	}
	tok := newToken()
	p.grants.add(tok, grant{CPUs: cpus.String()})
	if dropped := p.grants.trimUnbound(maxUnboundGrants(p.alloc.Layout().Exclusive.Size()), p.grantOfAbsentPod); len(dropped) > 0 {
		p.log.Warnf("kubelet grants: too many allocations held by no running pod (never shown by a container, or their pod is gone); the oldest %d (CPUs %s) forgotten", len(dropped), strings.Join(dropped, " "))
	}
	return p.grants, tok, p.grants.snapshot(), nil
}

// maxUnboundGrants bounds the allocations no container has shown yet. The
// kubelet makes them at admission, one per container asking for the
// resource, and a pod deleted before its containers started leaves its
// grants unbound until a pod binds their CPUs (bindGrant): a tenant
// churning such pods must not grow the grants file without end. The
// bound leaves room for every exclusive CPU being allocated to pods with
// many containers each.
func maxUnboundGrants(exclusiveCPUs int) int { return 16 * max(exclusiveCPUs, 4) }

func (p *Plugin) holders(cpus cpuset.CPUSet) string {
	var out []string
	for _, a := range p.alloc.Assignments() {
		if pools.IsExclusive(a.Pool) && !a.Held().Intersection(cpus).IsEmpty() {
			out = append(out, a.Pod.ContainerName(a.Container))
		}
	}
	return fmt.Sprint(out)
}

// attachGrant fills in the CPUs the kubelet allocated to the container, if
// its environment carries a grant token, and returns the token ("" when it
// carries none), for bindGrant once the container is placed. A token that
// the daemon does not know, or that belongs to another container (or,
// unbound to a container yet, to another pod), is refused, and so is one
// whose CPUs a prepared DRA claim has (grantOnClaim). Pod annotations
// play no part: only the environment the kubelet built counts. It changes
// nothing: a creation that fails binds nothing. running tells a container
// the runtime already runs (adopted), see claimOnGrant.
func (p *Plugin) attachGrant(pod *api.PodSandbox, ctr *api.Container, info *allocator.Container, running bool) (string, error) {
	tok, present, err := grantToken(ctr.GetEnv())
	if err != nil || !present {
		return "", err
	}
	g, ok := p.grants.byToken[tok]
	if !ok {
		return "", fmt.Errorf("%s: unknown grant token; it is set by the kubelet when the container requests %s, and cannot be set by hand", EnvGrant, config.ResourceExclusive)
	}
	owner := allocator.PodRef{Namespace: g.Namespace, Name: g.Pod}
	switch {
	case g.PodUID == "":
	case g.PodUID != pod.GetUid() && g.Container == "":
		return "", fmt.Errorf("%s: the grant belongs to pod %s/%s; it cannot be reused", EnvGrant, g.Namespace, g.Pod)
	case g.PodUID != pod.GetUid() || (g.Container != "" && g.Container != ctr.GetName()):
		return "", fmt.Errorf("%s: the grant belongs to container %s; it cannot be reused", EnvGrant, owner.ContainerName(g.Container))
	}
	if err := p.grantOnClaim(ctr.GetEnv(), g.cpusOf(), running); err != nil {
		return "", fmt.Errorf("%s: %w", EnvGrant, err)
	}
	info.KubeletCPUs = g.cpusOf()
	return tok, nil
}

// bindGrant binds the grant tok to the container that was just placed on
// its CPUs (in memory; see grantsChanged). The first time a container binds
// it, it also settles the older grants that share those CPUs: the
// kubelet's accounting gives a CPU to one pod at a time, and it allocated
// these CPUs to this pod after them, so their pods had ended by then:
//   - an older grant of another pod is dropped (the ending-pod case: its
//     container stopped, or this placement would have failed);
//   - an older grant no container has shown yet is an allocation that
//     never became a container, or this pod's own earlier one (the init
//     container's, when the app container binds first because the daemon
//     was away while the init container ran): it becomes this pod's, so
//     that no other pod can show it, and it goes with this pod;
//   - a grant of this pod stays, and so does every newer one: a later
//     container of this pod (the app container reusing the init container's
//     devices), or a pod admitted after this one ended, whose container
//     this one's binding must never take from.
//
// A binding made again (a restart of the container, Synchronize) settles
// nothing: the pod may have ended in the kubelet's view meanwhile.
func (p *Plugin) bindGrant(tok string, pod *api.PodSandbox, ctr *api.Container) {
	g, ok := p.grants.byToken[tok]
	if tok == "" || !ok || g.Container != "" {
		return
	}
	g.PodUID, g.Namespace, g.Pod, g.Container = pod.GetUid(), pod.GetNamespace(), pod.GetName(), ctr.GetName()
	p.grants.byToken[tok] = g
	cpus := g.cpusOf()
	for other, o := range p.grants.byToken {
		if other == tok || o.PodUID == pod.GetUid() || o.Seq >= g.Seq || o.cpusOf().Intersection(cpus).IsEmpty() {
			continue
		}
		if o.PodUID == "" {
			o.PodUID, o.Namespace, o.Pod = pod.GetUid(), pod.GetNamespace(), pod.GetName()
			p.grants.byToken[other] = o
			continue
		}
		p.log.Infof("kubelet grant of container %s dropped: the kubelet gave CPUs %s to pod %s/%s", allocator.PodRef{Namespace: o.Namespace, Name: o.Pod}.ContainerName(o.Container), o.cpusOf().Intersection(cpus), pod.GetNamespace(), pod.GetName())
		p.grants.remove(other)
	}
	p.grantsChanged()
}

// grantOfAbsentPod tells whether a grant is its pod's while the runtime
// runs no sandbox of that pod. Synchronize keeps such grants (see
// keepAbsentGrants); they count towards the bound on unbound grants.
// Before the first Synchronize no sandbox is known yet, so none is absent.
func (p *Plugin) grantOfAbsentPod(g grant) bool {
	return p.synced && g.PodUID != "" && p.podSandboxes[g.PodUID] == 0
}

// keepAbsentGrants keeps, at Synchronize, the grants of pods the runtime
// does not report, and says how many. The runtime reports no pod after a
// reboot that emptied it (CRI-O removes its containers and sandboxes after
// a reboot), yet the kubelet re-creates each pod of its checkpoint, same
// UID, and its containers show the tokens it checkpointed: Allocate is not
// called again. Forgetting those grants would refuse every container of
// the resource after the reboot; the grants file is fsynced for them.
// A kept grant pins nothing and holds no CPU (the allocator, which only
// running containers fill, is the truth about pinning): it admits its own
// pod's container, and goes when its pod is removed (RemovePodSandbox),
// when another pod binds a newer allocation of its CPUs (bindGrant; the
// kubelet reallocates them only once the pod ended), or at the bound on
// unbound grants (trimUnbound).
func (p *Plugin) keepAbsentGrants(podUIDs map[string]bool) {
	absent := map[string]bool{}
	n := 0
	for _, g := range p.grants.byToken {
		if g.PodUID != "" && !podUIDs[g.PodUID] {
			absent[g.PodUID] = true
			n++
		}
	}
	if n > 0 {
		p.log.Infof("synchronize: %d kubelet grants of %d pods the runtime does not run are kept (after a reboot the kubelet re-creates those pods with their tokens); each goes with its pod's removal, or when the kubelet gives its CPUs to another pod", n, len(absent))
	}
}

// forgetGrants drops the grants of pods that are gone.
func (p *Plugin) forgetGrants(gone func(uid string) bool) {
	changed := false
	for tok, g := range p.grants.byToken {
		if g.PodUID != "" && gone(g.PodUID) {
			p.grants.remove(tok)
			changed = true
		}
	}
	if changed {
		p.grantsChanged()
	}
}

// grantsChanged tells the state writer that an NRI handler changed the
// grants: the writer persists them with the state, in the background, so
// that the handler replies without waiting for the disk. A kill -9 before
// that write loses nothing that matters: a binding not on disk is made
// again by the first container that shows the token (the runtime re-reports
// it at Synchronize, and the kubelet re-creates with the same token), and
// the grant of a pod removed before the write is kept as a grant of a pod
// the runtime does not run (keepAbsentGrants), which goes when another pod
// binds its CPUs.
func (p *Plugin) grantsChanged() {
	p.grants.changed()
	p.stateChanged()
}

func (p *Plugin) numaOf(cpu int) int {
	if c, ok := p.topo.CPU(cpu); ok && c.NUMA != sysfs.Unknown {
		return c.NUMA
	}
	return -1
}

// forgetGrantsOf drops the grants of a removed pod, unless the pod lives on
// in another sandbox (the kubelet re-created it and removes the old one):
// its containers, re-created with the kubelet's cached allocation, still
// show their tokens.
func (p *Plugin) forgetGrantsOf(pod *api.PodSandbox) {
	if p.podLivesOn(pod) {
		return
	}
	p.forgetGrants(func(uid string) bool { return uid == pod.GetUid() })
}
