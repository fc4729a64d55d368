package plugin

// A restart and a quota-lifted container ("at least 256 CPUs"): a set that
// is no grow of its record, a lost live shrink whose record cannot be had,
// and a record that cannot be had for another reason.

import (
	"fmt"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// atLeastNoGrow tells whether keepResized must leave a remembered
// container to repairAll without reading its set as a lost resize: the
// runtime shows its request only as "at least" milli (the plugin lifted
// its quota; the shares are at their cap), which its record meets, and it
// runs on a set that is no grow of its record (part is its exclusive part
// there). Such a set says nothing of a request: judged as a resize to the
// bound it was logged as one, with the advice for a kubelet without a CFS
// quota, for a container no resize touched.
func atLeastNoGrow(rec allocator.Assignment, part cpuset.CPUSet, milli int64, atLeast bool) bool {
	return atLeast && rec.MilliCPU >= milli && (part.Size() <= rec.CPUs.Size() || !rec.CPUs.IsSubsetOf(part))
}

// keepLostShrink keeps where the runtime runs it a remembered exclusive
// container whose request the runtime shows only as "at least 256 CPUs"
// (the plugin lifted its quota) when repairKnown cannot pin it back on its
// record (why): it runs on part of its record's CPUs, at least 256 of
// them, which is what a live shrink gives (the plugin accepted it, gave the
// rest back, and a kill lost the record), and the rest cannot be had
// again: another container runs on them (the CPUs the shrink gave back,
// placed since), and none of them is offline (allocator.GivenAway). Why
// Repin failed decides: a record CPU offline, or a pool that no longer has
// them, is no shrink, and reading one rewrote the request of a container
// no resize touched. keepResized leaves such a set to be pinned back on the
// record, because a shrink cgroup v1 made (CPUs offline and back while the
// plugin was down) looks the same; but once the record cannot be had,
// placing it anew cannot size it ("at least 256 CPUs" is no size) and
// confined 256 CPUs or more of work to infra, although it runs on CPUs
// nobody else has. The runtime is the truth: it keeps the CPUs it runs on,
// in a shape a live shrink makes (ReadmitResized), its request read as
// their count, and its record says so; nobody is moved. It tells whether
// it was kept; when not, nothing was added, and read is the request it
// read from the CPUs it runs on when it was a lost shrink that cannot stay
// there (0 else): the kubelet shrank it to that, so repairKnown places it
// by that and not by its record's stale larger one.
func (p *Plugin) keepLostShrink(pod *api.PodSandbox, c *api.Container, st state.ContainerState, why error) (kept bool, read int64) {
	if pod == nil || !pools.IsExclusive(st.Pool) {
		return false, 0
	}
	milli, atLeast := milliCPU(c, qosClass(pod))
	r, _ := p.readRemembered(c, st)
	part := p.alloc.ExclusivePart(r)
	n := int64(part.Size())
	rec := r.Assignment
	if !atLeast || rec.MilliCPU < milli || n*1000 < milli || n >= int64(rec.CPUs.Size()) || !part.IsSubsetOf(rec.CPUs) {
		return false, 0
	}
	if !p.alloc.GivenAway(rec, part) {
		// Repin failed for another reason than CPUs the shrink gave back
		// and another now has (a CPU of the record offline, the pool
		// changed): that is no shrink, and its request is not the count.
		return false, 0
	}
	who := rememberedRef(st)
	req, err := p.resizeRequest(pod, c, rec, n*1000, false)
	if err != nil {
		// Refused under the configuration now: judged by what its record
		// knows of its options, as keepResized judges a lost resize.
		req = recordedResizeRequest(rec, n*1000)
	}
	res, err := p.alloc.ReadmitResized(r, req)
	if err != nil {
		p.log.Warnf("synchronize: container %s runs on %d of its record's CPUs (%s) and cannot stay there either: %v", who, n, part, err)
		return false, n * 1000
	}
	p.log.Warnf("synchronize: container %s runs on %d CPUs %s, of its record's %d CPUs %s, whose others cannot be had again (%v); "+
		"keeping it where it runs, its request read as %dm from them (its quota lifted, the runtime shows only at least 256 CPUs: a shrink whose record a kill lost)",
		who, n, res.Assignment.CPUs, rec.CPUs.Size(), rec.CPUs, why, n*1000)
	if res.Warning != "" {
		// Why its shared part runs off the shared pool.
		p.log.Warnf("synchronize: container %s: %s", who, res.Warning)
	}
	return true, 0
}

// recordedAtLeast is the request to place anew a remembered exclusive
// container whose record repairKnown cannot pin back (why) and that
// keepLostShrink did not keep, when the runtime shows its request only as
// "at least" milli (its shares are at their cap, and no CFS quota says
// more: the plugin lifted it, or its kubelet sets none) and its record's
// request meets that bound: the record is the one place its size is still
// known, and the runtime's bound agrees with it. shrunk, when not 0, is the
// request keepLostShrink read from the CPUs it runs on (a live shrink whose
// record a kill lost, and that cannot stay there): the kubelet's current
// request, so it is placed by that and not by the record's stale larger
// one. Without it, the policy could not size it and it was confined to
// infra, its 256 CPUs or more of work on the infra CPUs. Placed by it, it
// is treated as an exact-request container whose record cannot be had is
// (allocator.Adopt): it keeps the CPUs it runs on that are still free and
// its pool's, and gets the rest where the pool can give them; no other
// container is moved. explain makes the reason of a confinement say which
// CPUs cannot be had and why, that placing it anew was refused and why
// (the cause), where its size came from (background only: the quota is
// never why a known request cannot be placed), and, for a placement that
// found no room, what to do. It is 0 and nil when the runtime shows an
// exact request or the record does not meet the bound (its size is then
// unknown, as at a creation).
func recordedAtLeast(c *api.Container, qos string, rec allocator.Assignment, why error, shrunk int64) (int64, func(error) error) {
	milli, atLeast := milliCPU(c, qos)
	if !atLeast || !pools.IsExclusive(rec.Pool) || rec.MilliCPU < milli {
		return 0, nil
	}
	size, source := rec.MilliCPU, "its record's request"
	if shrunk >= milli {
		size, source = shrunk, "the request read from the CPUs it runs on (a live shrink its record lost)"
	}
	bound := "its kubelet sets no CFS quota"
	if rec.NoCPUQuota {
		bound = "nri-cpupool lifted its CFS quota"
	}
	n := allocator.CPUsFor(size)
	explain := func(err error) error {
		err = fmt.Errorf("its CPUs %s cannot be had again (%v), and %s of %dm cannot be placed anew: %w "+
			"(its size is known from that; %s and the runtime shows only at least 256 CPUs)", rec.CPUs, why, source, size, err, bound)
		if allocator.ReasonOf(err) == allocator.ReasonPlacement {
			err = fmt.Errorf("%w; give pool %s room for %d CPUs (the CPUs the config gives it, or those other containers free)", err, rec.Pool, n)
		}
		return err
	}
	return size, explain
}
