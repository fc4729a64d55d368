package plugin

import (
	"fmt"

	"github.com/cpupool/nri-cpupool/allocator"
)

// noteNotAllowed tells, in the log and on the pod, that a container placed
// by req went to the default pool although guaranteedExclusive would have
// made it exclusive: the pool's allowedNamespaces does not list its
// namespace (allocator.Request.NotAllowed). The operator chose that, so
// the log says it at info; the pod's owner, who asked for a Guaranteed
// pod of whole CPUs and may expect the kubelet static policy's rule, gets
// a Warning. Called under the lock.
func (p *Plugin) noteNotAllowed(who string, req allocator.Request) {
	if req.NotAllowed == "" {
		return
	}
	msg := fmt.Sprintf("container %s: in pool %s, not %s: guaranteedExclusive gives a Guaranteed pod's whole CPUs the %s pool, but allowedNamespaces.%s does not list namespace %q",
		who, req.Pool, req.NotAllowed, req.NotAllowed, req.NotAllowed, req.Pod.Namespace)
	p.log.Infof("%s", msg)
	p.postEvent(req.Pod, true, EventNotAllowed, msg)
}
