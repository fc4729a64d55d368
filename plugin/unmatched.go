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
// the sandbox, refused or not: the pod has it either way.
func (p *Plugin) noteContainer(pod *api.PodSandbox, ctr *api.Container) {
	s, ok := p.seen[pod.GetId()]
	if !ok || s.overflow || s.names[ctr.GetName()] {
		return
	}
	if len(s.names) == maxSeenContainers {
		s.overflow, s.names = true, nil
		return
	}
	s.names[ctr.GetName()] = true
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

type unmatchedKey struct{ key, name string }

// unmatchedAnnotations lists, sorted, the container-scoped keys of our
// domain whose container is not among created.
func unmatchedAnnotations(ann map[string]string, created map[string]bool) []unmatchedKey {
	var out []unmatchedKey
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		base, scope, _ := strings.Cut(k, "/")
		name, ok := strings.CutPrefix(scope, "container.")
		if !ok || !strings.HasSuffix(base, "."+allocator.AnnotationDomain) && base != allocator.AnnotationDomain {
			continue
		}
		if !created[name] {
			out = append(out, unmatchedKey{k, name})
		}
	}
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
