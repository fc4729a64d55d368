package plugin

import "github.com/cpupool/nri-cpupool/allocator"

// noteNotAllowed tells, in the log and on the pod, that a container placed
// by req went to the default pool although guaranteedExclusive would have
// made it exclusive: the pool's allowedNamespaces does not list its
// namespace (allocator.Request.NotAllowed). The operator chose that, so
// the log says it at info; the pod's owner, who asked for a Guaranteed
// pod of whole CPUs and may expect the kubelet static policy's rule, gets
// a Warning, in the words explain and simulate use (allocator.NotAllowedReason).
// Called under the lock.
func (p *Plugin) noteNotAllowed(who string, req allocator.Request) {
	if req.NotAllowed == "" {
		return
	}
	msg := "container " + who + ": " + req.NotAllowedMessage()
	p.log.Infof("%s", msg)
	p.postEvent(req.Pod, true, EventNotAllowed, msg)
}
