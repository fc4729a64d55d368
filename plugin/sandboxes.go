package plugin

// The pod handlers, and the pod sandboxes the plugin knows, kept by id and
// counted by pod.

import (
	"context"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/allocator"
)

// sandbox is what pinning a pod's infra container needs. Sandboxes are not
// persisted: Synchronize lists them again after any restart.
type sandbox struct {
	uid, namespace, name, cgroupsPath string
	// cgroupParent is the pod's cgroup, whose CFS quota the pinner lifts
	// for pods with exclusive CPUs (liftPodQuota).
	cgroupParent string
	pid          uint32
	// noPodQuota: the pinner found no pod cgroup quota to lift and said so
	// once; later rounds stay quiet about it.
	noPodQuota bool
	// podQuotaLifted: the pinner lifted the pod cgroup's quota (or found it
	// lifted), so an update of any container of the pod asks for it again.
	podQuotaLifted bool
	// top is the top-level cgroup of cgroupParent (podCgroups), worked
	// out at the first pass that asks and kept for the sandbox's life;
	// topKnown says it was.
	top      string
	topKnown bool
}

// addSandbox remembers a pod's sandbox (replacing one of the same id).
func (p *Plugin) addSandbox(pod *api.PodSandbox) {
	p.dropSandbox(pod.GetId())
	sb := sandboxOf(pod)
	p.sandbox[pod.GetId()] = sb
	if sb.uid != "" {
		p.podSandboxes[sb.uid]++
	}
}

// dropSandbox forgets a sandbox.
func (p *Plugin) dropSandbox(id string) {
	delete(p.seen, id)
	sb, ok := p.sandbox[id]
	if !ok {
		return
	}
	delete(p.sandbox, id)
	if sb.uid == "" {
		return
	}
	if p.podSandboxes[sb.uid]--; p.podSandboxes[sb.uid] <= 0 {
		delete(p.podSandboxes, sb.uid)
	}
}

// podLivesOn tells whether a sandbox of the pod other than this one is
// known (the kubelet re-created the pod's sandbox).
func (p *Plugin) podLivesOn(pod *api.PodSandbox) bool {
	if pod.GetUid() == "" {
		return false
	}
	n := p.podSandboxes[pod.GetUid()]
	if sb, ok := p.sandbox[pod.GetId()]; ok && sb.uid == pod.GetUid() {
		n-- // this very sandbox
	}
	return n > 0
}

func sandboxOf(pod *api.PodSandbox) sandbox {
	return sandbox{uid: pod.GetUid(), namespace: pod.GetNamespace(), name: pod.GetName(), cgroupsPath: pod.GetLinux().GetCgroupsPath(),
		cgroupParent: pod.GetLinux().GetCgroupParent(), pid: pod.GetPid()}
}

// RunPodSandbox pins the new pod's infra (pause) container to infra, since
// NRI cannot adjust sandboxes.
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addSandbox(pod)
	p.watchContainers(pod)
	p.pinSandboxLater(pod.GetId())
	return nil
}

// StopPodSandbox ends the pod's life on this node: the kubelet stops a
// sandbox when the pod is deleted or has finished (for instance a
// restartPolicy Never pod whose containers all ended), which is when its
// CPU manager releases the pod's CPUs. The CPUs held for its stopped
// containers are released, and defensively those of any container the
// runtime did not report as stopped.
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checkUnmatched(pod)
	p.dropSandbox(pod.GetId())
	return p.releasePod(pod)
}

// RemovePodSandbox forgets the pod, as StopPodSandbox does (the runtime
// may remove a sandbox without stopping it first).
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checkUnmatched(pod)
	p.dropSandbox(pod.GetId())
	p.forgetGrantsOf(pod)
	p.forgetPodRefusals(pod.GetUid())
	return p.releasePod(pod)
}

// releasePod ends the holds and assignments of a pod whose sandbox stopped
// or was removed, unless another sandbox of the pod is known. Neither event
// can carry updates: infra members learn of a grown infra right after the
// handler returns.
func (p *Plugin) releasePod(pod *api.PodSandbox) error {
	if p.podLivesOn(pod) {
		// The kubelet re-created the pod's sandbox and now stops or
		// removes the old one: the pod lives on in the new one.
		p.log.Debugf("pod %s/%s: old sandbox %s gone, the pod runs in another sandbox", pod.GetNamespace(), pod.GetName(), pod.GetId())
		return nil
	}
	holds := len(p.alloc.HoldsOf(pod.GetUid()))
	released, res := p.alloc.ReleasePod(pod.GetUid())
	if holds == 0 && len(released) == 0 {
		return nil
	}
	for _, a := range released {
		p.recordRelease(allocator.Result{Assignment: a})
	}
	p.recordRelease(res)
	p.deferFollowers(res)
	p.log.Infof("pod %s/%s: sandbox gone, %d held CPU sets and %d containers released", pod.GetNamespace(), pod.GetName(), holds, len(released))
	p.stateChanged()
	return nil
}

// reapGoneSandboxes releases the holds of pods whose every known sandbox
// has lost its cgroup and that run no container: their sandbox stopped
// without the runtime saying so. containerd sends no StopPodSandbox or
// RemovePodSandbox for pods created before its own restart. It is called
// only before refusing a container, and returns the pods released.
//
// "Gone" must mean gone: a cgroup tree the plugin cannot see (a wrong
// cgroupRoot, a DaemonSet without the node's cgroup mount) makes every
// sandbox look gone, and releasing the holds of live pods would give a
// crash-looping container's CPUs to another pod. So an absence counts only
// when the cgroup of the sandbox asking for CPUs, which lives, is seen
// under the same root; otherwise nothing is released and the reason is
// logged.
func (p *Plugin) reapGoneSandboxes(asking *api.PodSandbox) int {
	if len(p.alloc.Holds()) == 0 {
		return 0
	}
	if path := asking.GetLinux().GetCgroupsPath(); !p.pinner.Exists(path) {
		p.log.Warnf("cannot tell whether the sandboxes of pods with held CPUs are gone: the cgroup of pod %s/%s's own sandbox (%q) is not under %s; releasing nothing (is cgroupRoot the node's cgroup tree, mounted into the plugin's container?)",
			asking.GetNamespace(), asking.GetName(), path, p.pinner.Hierarchy())
		return 0
	}
	running := map[string]bool{}
	for _, a := range p.alloc.Assignments() {
		running[a.Pod.UID] = true
	}
	bySandbox := map[string][]string{}
	for id, sb := range p.sandbox {
		bySandbox[sb.uid] = append(bySandbox[sb.uid], id)
	}
	released := 0
	for _, h := range p.alloc.Holds() {
		uid := h.Pod.UID
		if running[uid] || len(p.alloc.HoldsOf(uid)) == 0 {
			continue // running, or released with an earlier hold of the pod
		}
		gone := true
		for _, id := range bySandbox[uid] {
			gone = gone && p.pinner.Gone(p.sandbox[id].cgroupsPath)
		}
		if !gone {
			continue
		}
		for _, id := range bySandbox[uid] {
			p.dropSandbox(id)
		}
		_, res := p.alloc.ReleasePod(uid)
		p.recordRelease(res)
		p.deferFollowers(res)
		p.log.Infof("pod %s/%s: sandbox gone without a stop from the runtime; CPUs held for its stopped containers released", h.Pod.Namespace, h.Pod.Name)
		released++
	}
	if released > 0 {
		p.stateChanged()
	}
	return released
}
