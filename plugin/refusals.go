package plugin

// The last refusal of each recently refused container, kept in the state
// file for `nri-cpupool explain`: the runtime shows a refusal's message
// once, to whoever created the container, and the kubelet's retries show
// it only in its log. Recording is a few field copies under the lock the
// creation holds anyway; the writer persists it in the background.

import (
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/state"
)

// noteRefusal records a refusal of the container, under the lock: the
// container's previous refusal is replaced (counted), and beyond
// state.MaxRefusals the oldest is forgotten, so that tenants who are
// refused over and over do not grow the file.
func (p *Plugin) noteRefusal(pod *api.PodSandbox, ctr *api.Container, reason, message string) {
	if len(message) > state.MaxRefusalMessage {
		message = truncateUTF8(message, state.MaxRefusalMessage-len("…")) + "…"
	}
	r := state.Refusal{PodUID: pod.GetUid(), PodNamespace: pod.GetNamespace(), PodName: pod.GetName(), Container: ctr.GetName(),
		Time: time.Now().UTC(), Reason: reason, Message: message, Count: 1}
	list := p.memory.Refusals
	if i := refusalOf(list, r.PodUID, r.PodNamespace, r.PodName, r.Container); i >= 0 {
		r.Count = list[i].Count + 1
		list = slices.Delete(list, i, i+1)
	}
	if len(list) >= state.MaxRefusals {
		list = slices.Delete(list, 0, len(list)-state.MaxRefusals+1)
	}
	p.memory.Refusals = append(list, r)
	p.refusalsChanged()
}

// forgetRefusal drops the container's refusal once it is placed: what
// explain shows of it then is its placement.
func (p *Plugin) forgetRefusal(pod *api.PodSandbox, ctr *api.Container) {
	if len(p.memory.Refusals) == 0 {
		return // the common case: no string compared
	}
	if i := refusalOf(p.memory.Refusals, pod.GetUid(), pod.GetNamespace(), pod.GetName(), ctr.GetName()); i >= 0 {
		p.memory.Refusals = slices.Delete(p.memory.Refusals, i, i+1)
		p.refusalsChanged()
	}
}

// forgetPodRefusals drops the refusals of a pod whose sandbox is removed:
// the pod is gone.
func (p *Plugin) forgetPodRefusals(uid string) {
	if uid == "" || len(p.memory.Refusals) == 0 {
		return
	}
	n := len(p.memory.Refusals)
	p.memory.Refusals = slices.DeleteFunc(p.memory.Refusals, func(r state.Refusal) bool { return r.PodUID == uid })
	if len(p.memory.Refusals) != n {
		p.refusalsChanged()
	}
}

// keepRefusals carries the remembered refusals of pods the runtime still
// has over a Synchronize, which starts memory over: a refused container
// of a pod that lives on is still refused until the kubelet's next retry.
func (p *Plugin) keepRefusals(remembered []state.Refusal, pods []*api.PodSandbox) {
	if len(remembered) == 0 {
		return
	}
	alive := make(map[string]bool, len(pods))
	for _, pod := range pods {
		alive[pod.GetUid()] = true
	}
	for _, r := range remembered {
		if alive[r.PodUID] {
			p.memory.Refusals = append(p.memory.Refusals, r)
		}
	}
	p.refusalsDirty = true
}

// refusalsChanged tells the writer, which copies the refusals at its next
// collection; no pool or container changed, so nothing else is told.
func (p *Plugin) refusalsChanged() {
	p.refusalsDirty = true
	p.gen++
	p.writer.changed(p.gen)
}

// refusalOf finds a container's refusal in list: by pod UID when both
// have one, else by namespace and pod name; -1 when there is none.
func refusalOf(list []state.Refusal, uid, namespace, pod, container string) int {
	return slices.IndexFunc(list, func(r state.Refusal) bool {
		if r.Container != container {
			return false
		}
		if r.PodUID != "" && uid != "" {
			return r.PodUID == uid
		}
		return r.PodNamespace == namespace && r.PodName == pod
	})
}

// truncateUTF8 cuts s to at most n bytes on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
