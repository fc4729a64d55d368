package plugin

// The pod sandboxes the plugin knows, kept by id and counted by pod.

import (
	"github.com/containerd/nri/pkg/api"
)

// sandbox is what pinning a pod's infra container needs. Sandboxes are not
// persisted: Synchronize lists them again after any restart.
type sandbox struct {
	uid, namespace, name, cgroupsPath string
	pid                               uint32
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
	return sandbox{uid: pod.GetUid(), namespace: pod.GetNamespace(), name: pod.GetName(), cgroupsPath: pod.GetLinux().GetCgroupsPath(), pid: pod.GetPid()}
}
