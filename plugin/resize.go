package plugin

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// resize applies an in-place resize: the container's new CPU request comes
// in an UpdateContainer. The reply carries the container's new cpuset and,
// when infra moved, its members' updates; sandboxes are re-pinned before
// it returns. A refusal fails the update and changes nothing.
//
// A new memory limit in the same update (memAsked) is counted once the CPUs
// are: a refusal fails the whole update, and the runtime then applies
// neither.
//
// atLeast says the new request is only known to be at least milli (the
// kubelet's shares at their cap, see milliOf).
func (p *Plugin) resize(pod *api.PodSandbox, ctr *api.Container, before allocator.Assignment, milli int64, atLeast bool, memLimit int64, memAsked bool) ([]*api.ContainerUpdate, error) {
	res, err := p.applyResize(pod, ctr, before, milli, atLeast)
	if err != nil {
		return nil, err
	}
	if memAsked {
		p.resizeMemory(res.Assignment, memLimit)
		res.Assignment, _ = p.alloc.Get(res.Assignment.ID)
	}
	p.stateChanged()
	a := res.Assignment
	u := cpuUpdate(a, p.topo.Online, p.cfg.PinMemory)
	u.IgnoreFailure = false
	if a.NoCPUQuota {
		u.SetLinuxCPUQuota(noQuota) // the kubelet sent a quota for the new limit
	}
	delete(p.pending, a.ID)
	return append([]*api.ContainerUpdate{u}, p.followers(res)...), nil
}

// cpuRequestChanged tells whether milli, the CPU request a running
// container shows now, is another request than recorded, its record's: an
// in-place resize. atLeast says milli is only known to be a lower bound
// (the kubelet's shares at their cap, see milliOf), which a recorded
// request of milli or more meets: that is no resize. A Guaranteed
// container of 256 CPUs or more is sized by its CFS quota, and once the
// plugin lifted it (disableCPUQuota) the runtime shows only the capped
// shares; taken for a resize to 256000m, every restart and every update
// of it without a quota would be refused for a resize nobody asked for.
func cpuRequestChanged(recorded, milli int64, atLeast bool) bool {
	if milli <= 0 || milli == recorded {
		return false
	}
	return !atLeast || milli > recorded
}

// applyResize decides an in-place resize of the running container before
// to milli, the CPU request the runtime has for it, by the rules every
// resize follows, wherever it comes from (a live UpdateContainer, or one
// the runtime applied while the plugin was down, which Synchronize finds):
// a container whose CPUs are the kubelet's devices or a ResourceClaim's is
// refused, the others grow or shrink in place (allocator.Resize). It
// records the outcome, counts it (cpupool_resizes_total) and logs it; a
// refusal is also told to the pod (refuseResize) and changes nothing. The
// caller sends the container its cpuset and writes the state.
func (p *Plugin) applyResize(pod *api.PodSandbox, ctr *api.Container, before allocator.Assignment, milli int64, atLeast bool) (allocator.Result, error) {
	who := before.Pod.ContainerName(before.Container)
	if _, granted, _ := grantToken(ctr.GetEnv()); granted && pools.IsExclusive(before.Pool) {
		// The kubelet counted cpupool.dev/exclusive devices, not the CPU
		// request: growing or shrinking the cpuset would part the
		// kubelet's accounting from the real CPUs.
		return allocator.Result{}, p.refuseResize(before, fmt.Errorf("nri-cpupool: container %s: resize to %dm refused: its CPUs %s are the %s devices the kubelet allocated; change the resource count (a new pod) instead",
			who, milli, before.CPUs, config.ResourceExclusive))
	}
	if claimsShown(ctr.GetEnv()) && pools.IsExclusive(before.Pool) {
		// The scheduler counted the claim's CPUs, not the CPU request.
		return allocator.Result{}, p.refuseResize(before, fmt.Errorf("nri-cpupool: container %s: resize to %dm refused: its CPUs %s are its ResourceClaim's; change the claim (a new pod) instead",
			who, milli, before.CPUs))
	}
	req, err := p.resizeRequest(pod, ctr, before, milli, atLeast)
	if err != nil {
		return allocator.Result{}, p.refuseResize(before, fmt.Errorf("nri-cpupool: container %s: resize to %dm: %w", who, milli, err))
	}
	res, err := p.alloc.Resize(req)
	if err != nil {
		p.log.Errorf("refusing resize of container %s from %dm to %dm: %v", who, before.MilliCPU, milli, err)
		return allocator.Result{}, p.refuseResize(before, fmt.Errorf("nri-cpupool: %w", err))
	}
	// Persisted in the background, like every decision.
	p.recordPlacement(res)
	a := res.Assignment
	result := "unchanged"
	switch {
	case a.CPUs.Size() > before.CPUs.Size():
		result = "grown"
	case a.CPUs.Size() < before.CPUs.Size():
		result = "shrunk"
	}
	p.metrics.countResize(a.Pool, result)
	if pools.IsExclusive(a.Pool) {
		p.log.Infof("container %s resized from %dm to %dm: CPUs %s (were %s), mems %s", who, before.MilliCPU, milli, a.CPUs, before.CPUs, a.Mems)
	} else {
		p.log.Infof("container %s resized from %dm to %dm: stays on pool %s", who, before.MilliCPU, milli, a.Pool)
	}
	return res, nil
}

// resizeRequest is the request of an in-place resize of the running
// container before to milli, as every resize reads it: its options are
// its pod's annotations over its pool's configuration now, as at its
// creation. Synchronize reads a resize whose record a kill lost the same
// way (keepResized), so that it keeps only a shape a resize makes.
func (p *Plugin) resizeRequest(pod *api.PodSandbox, ctr *api.Container, before allocator.Assignment, milli int64, atLeast bool) (allocator.Request, error) {
	info := p.toContainer(pod, ctr)
	info.MilliCPU, info.MilliCPUAtLeast = milli, atLeast
	// A running container keeps its pool: only its size changes, and its
	// annotations are judged against the pool it runs in. Not so for one
	// Synchronize confined to infra: it runs there because its annotations
	// could not be applied, so they are judged as at its creation (against
	// the pool they ask for), else every CPU resize of it would be refused.
	if before.Rule.Kind != allocator.RuleConfined {
		info.Pool = before.Pool
	}
	req, err := p.policy.Request(info, p.resolveDeviceNUMA)
	if err != nil {
		return allocator.Request{}, err
	}
	req.Pool = before.Pool
	return req, nil
}

// refuseResize counts a refused in-place resize of the container a and
// tells its pod, with err, the error the runtime gets for the update (the
// kubelet shows it at best in the pod's resize status, which few read). It
// returns err. Called under the lock.
func (p *Plugin) refuseResize(a allocator.Assignment, err error) error {
	p.metrics.countResize(a.Pool, "refused")
	if p.wantsEvents() {
		p.postEvent(a.Pod, true, EventResizeRefused, err.Error())
	}
	return err
}

// resizeMemory counts a running container's new memory limit in place of
// the one counted (allocator.ResizeMemory) and records it; it tells
// whether anything changed. The runtime applies the limit itself: the reply
// carries nothing for it. Called under the lock.
func (p *Plugin) resizeMemory(before allocator.Assignment, limit int64) bool {
	res, changed, err := p.alloc.ResizeMemory(before.ID, limit)
	if err != nil || !changed {
		return false
	}
	p.recordPlacement(res)
	who := before.Pod.ContainerName(before.Container)
	p.log.Infof("container %s: memory limit resized from %s to %s: memory %s, mems %s",
		who, numamem.Bytes(numamem.DemandOf(before.Memory).Memory), numamem.Bytes(limit), formatMemory(res.Assignment.Memory), res.Assignment.Mems)
	if res.Warning != "" {
		p.log.Warnf("%s", res.Warning)
	}
	return true
}

// formatOrdered writes CPU ids in their order (not as a sorted cpuset).
func formatOrdered(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}

// parseOrdered reads formatOrdered's output; anything malformed reads as
// nothing added, so the container keeps all its CPUs as its original set.
func parseOrdered(s string) []int {
	if s == "" {
		return nil
	}
	var ids []int
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(f)
		if err != nil || id < 0 {
			return nil
		}
		ids = append(ids, id)
	}
	return ids
}
