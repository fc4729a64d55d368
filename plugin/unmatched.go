package plugin

// Container-scoped annotations ("pool.cpupool.dev/container.<name>") that
// name a container the pod never creates. One CreateContainer cannot tell:
// NRI's PodSandbox lists no containers, the kubelet creates a pod's
// containers one by one (init containers first, each after its image is
// pulled), and ephemeral containers come later still. What is knowable is
// the set of containers the runtime created in the pod over its whole life,
// and that is complete when its sandbox stops. So the plugin remembers the
// names of the containers created in each sandbox it saw start, and when
// the sandbox stops, warns about every container-scoped annotation whose
// container never came (docs/pools.md, "Annotations that match no
// container").

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// maxSeenContainers bounds the names remembered per sandbox; a pod with
// more containers is not checked (it would be reported wrongly).
const maxSeenContainers = 64

// maxNamedInWarning bounds the created containers a warning lists.
const maxNamedInWarning = 8

// seenContainers are the names of the containers created in one sandbox
// since the plugin saw it start.
type seenContainers struct {
	names    map[string]bool
	overflow bool
}

// watchContainers starts remembering a new sandbox's containers. Only a
// sandbox seen from its start is checked: for one found at Synchronize,
// the containers created and removed before are unknown.
func (p *Plugin) watchContainers(pod *api.PodSandbox) {
	p.seen[pod.GetId()] = &seenContainers{names: map[string]bool{}}
}

// noteContainer remembers that a container of this name was created in
// the sandbox, refused or not: the pod has it either way. It tells whether
// the name is new to the sandbox (not a restart of the container).
func (p *Plugin) noteContainer(pod *api.PodSandbox, ctr *api.Container) bool {
	s, ok := p.seen[pod.GetId()]
	if !ok || s.overflow || s.names[ctr.GetName()] {
		return false
	}
	if len(s.names) == maxSeenContainers {
		s.overflow, s.names = true, nil
		return false
	}
	s.names[ctr.GetName()] = true
	return true
}

// checkUnmatched warns, when a sandbox seen from its start stops, about
// each container-scoped annotation of the pod whose container was never
// created in it, and forgets the sandbox's names.
func (p *Plugin) checkUnmatched(pod *api.PodSandbox) {
	s, ok := p.seen[pod.GetId()]
	delete(p.seen, pod.GetId())
	if !ok || s.overflow || allocator.CheckAnnotations(pod.GetAnnotations()) != nil {
		// A pod with bad annotations had every container refused
		// with the reason already.
		return
	}
	for _, u := range unmatchedAnnotations(pod.GetAnnotations(), s.names) {
		p.metrics.unmatched.Inc()
		// The key is printed whole: CheckAnnotations passed it, so its
		// base is one of ours and the name a short DNS label.
		p.log.Warnf("pod %s/%s: annotation %s names container %s, which the pod never created (it created %s); the annotation had no effect, the pod's containers were placed by its other annotations and rules; correct the container name",
			pod.GetNamespace(), pod.GetName(), u.key, cpulist.Echo(u.name), createdList(s.names))
	}
}

// maxHintKeys bounds the container-scoped keys a creation compares with
// its container's name (a pod may have 128 keys of our domain).
const maxHintKeys = 16

// otherContainerKeys are the pod's container-scoped keys of our domain,
// sorted, when the container has none of its own (then every one names
// another container); nil otherwise. A pure function of the pod's
// annotations (bounded by CheckAnnotations) and the name, run before the
// lock: what typoCandidates compares and what the record keeps for
// explain (recordedKeys).
func otherContainerKeys(ann map[string]string, name string) []unmatchedKey {
	if hasContainerKey(ann, name) {
		return nil
	}
	return unmatchedAnnotations(ann, nil)
}

// maxRecordedKeys bounds the other containers' keys a record keeps.
const maxRecordedKeys = 8

// recordedKeys are at most maxRecordedKeys of others as the record keeps
// them (allocator.Rule.OtherContainerKeys): the near ones (the likely
// typos the creation warned about) kept first, then the rest in order,
// the kept ones sorted; comma-separated, "" (no allocation) for the
// common pod without any.
func recordedKeys(near, others []unmatchedKey) string {
	if len(others) == 0 {
		return ""
	}
	keys := make([]string, 0, min(len(others), maxRecordedKeys))
	for _, u := range near {
		if len(keys) < maxRecordedKeys {
			keys = append(keys, u.key)
		}
	}
	for _, u := range others {
		if len(keys) == maxRecordedKeys {
			break
		}
		if !slices.ContainsFunc(near, func(n unmatchedKey) bool { return n.key == u.key }) {
			keys = append(keys, u.key)
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// typoCandidates are the pod's container-scoped keys for a name one or
// two edits from the container's, none when the container has a key of
// its own (it is then not missing one). A pure function of the pod's
// annotations (bounded by CheckAnnotations) and the name, so that it runs
// before the lock: hintTypo then only asks which of them no container of
// the pod has had.
func typoCandidates(ann map[string]string, name string) []unmatchedKey {
	return nearKeys(otherContainerKeys(ann, name), name)
}

// nearKeys are those of others (otherContainerKeys) for a name one or two
// edits from name.
func nearKeys(others []unmatchedKey, name string) []unmatchedKey {
	if len(name) > 63 {
		return nil
	}
	var near []unmatchedKey
	for i, u := range others {
		if i == maxHintKeys {
			break
		}
		if d := len(u.name) - len(name); d >= -2 && d <= 2 && u.name != name && config.EditDistance(u.name, name) <= 2 {
			near = append(near, u)
		}
	}
	return near
}

// hintTypo warns, at a container's creation, when the container has no
// container-scoped annotation of its own but the pod has one for a name
// one or two edits from it (near, typoCandidates) that no container of
// the pod has had so far: most likely a typo, which the stop of the
// sandbox would report too, but late. It may be a container still to
// come ("web2" beside "web"), so it is worded as a question. It runs once
// per name, not at each restart. Called under the lock.
func (p *Plugin) hintTypo(pod *api.PodSandbox, ctr *api.Container, pool string, near []unmatchedKey) {
	s, ok := p.seen[pod.GetId()]
	if !ok || s.overflow {
		return
	}
	for _, u := range near {
		if s.names[u.name] {
			continue
		}
		msg := fmt.Sprintf("container %s: placed in pool %s without annotation %s, which names container %s, not created in this pod so far; if it is meant for %s, correct the name (a container of that name created later still gets it)",
			containerRef(pod, ctr), pool, u.key, cpulist.Echo(u.name), cpulist.Echo(ctr.GetName()))
		p.log.Warnf("%s", msg)
		p.postEvent(podRef(pod), true, EventAnnotationUnmatched, msg)
	}
}

// hasContainerKey tells whether any of our keys is scoped to the container.
func hasContainerKey(ann map[string]string, name string) bool {
	for k := range ann {
		if _, n, ok := allocator.ContainerScoped(k); ok && n == name && allocator.OurAnnotation(k) {
			return true
		}
	}
	return false
}

type unmatchedKey struct{ key, name string }

// unmatchedAnnotations lists, sorted, the container-scoped keys of our
// domain whose container is not among created. It sorts what it found,
// not every key of the pod: typoCandidates calls it before each
// creation's reply, and most pods have none (issue 45: no allocation
// then).
func unmatchedAnnotations(ann map[string]string, created map[string]bool) []unmatchedKey {
	var out []unmatchedKey
	for k := range ann {
		_, name, ok := allocator.ContainerScoped(k)
		if !ok || !allocator.OurAnnotation(k) {
			continue
		}
		if !created[name] {
			out = append(out, unmatchedKey{k, name})
		}
	}
	slices.SortFunc(out, func(a, b unmatchedKey) int { return strings.Compare(a.key, b.key) })
	return out
}

// createdList names the created containers, at most maxNamedInWarning.
func createdList(names map[string]bool) string {
	if len(names) == 0 {
		return "no container"
	}
	sorted := slices.Sorted(maps.Keys(names))
	shown := make([]string, 0, min(len(sorted), maxNamedInWarning))
	for _, n := range sorted[:min(len(sorted), maxNamedInWarning)] {
		shown = append(shown, cpulist.Echo(n))
	}
	s := strings.Join(shown, ", ")
	if more := len(sorted) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
