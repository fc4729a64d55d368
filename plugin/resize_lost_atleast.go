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
// it was kept; when not, nothing was added.
func (p *Plugin) keepLostShrink(pod *api.PodSandbox, c *api.Container, st state.ContainerState, why error) bool {
	if pod == nil || !pools.IsExclusive(st.Pool) {
		return false
	}
	milli, atLeast := milliCPU(c, qosClass(pod))
	r, _ := p.readRemembered(c, st)
	part := p.alloc.ExclusivePart(r)
	n := int64(part.Size())
	rec := r.Assignment
	if !atLeast || rec.MilliCPU < milli || n*1000 < milli || n >= int64(rec.CPUs.Size()) || !part.IsSubsetOf(rec.CPUs) {
		return false
	}
	if !p.alloc.GivenAway(rec, part) {
		// Repin failed for another reason than CPUs the shrink gave back
		// and another now has (a CPU of the record offline, the pool
		// changed): that is no shrink, and its request is not the count.
		return false
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
		return false
	}
	p.log.Warnf("synchronize: container %s runs on %d CPUs %s, of its record's %d CPUs %s, whose others cannot be had again (%v); "+
		"keeping it where it runs, its request read as %dm from them (its quota lifted, the runtime shows only at least 256 CPUs: a shrink whose record a kill lost)",
		who, n, res.Assignment.CPUs, rec.CPUs.Size(), rec.CPUs, why, n*1000)
	if res.Warning != "" {
		// Why its shared part runs off the shared pool.
		p.log.Warnf("synchronize: container %s: %s", who, res.Warning)
	}
	return true
}

// recordedAtLeast is the request to place anew a remembered exclusive
// container whose record repairKnown cannot pin back (why) and that
// keepLostShrink did not keep, when the runtime shows its request only as
// "at least" milli (the plugin lifted its quota; its shares are at their
// cap) and its record's request meets that bound: the record is the one
// place its size is still known, and the runtime's bound agrees with it.
// Without it, the policy could not size it and it was confined to infra,
// its 256 CPUs or more of work on the infra CPUs, with a message that its
// kubelet runs without a CFS quota (cpuCFSQuota: false): the plugin lifted
// the quota, and the cause was its record's CPUs (a config that gave them
// to another pool, an offline CPU another pool has). Placed by its record,
// it is treated as an exact-request container whose record cannot be had
// is: it stays where it runs if that is a set of its size it may keep
// (allocator.Adopt), else it is placed anew where the pool can still give
// it its CPUs: its record's CPUs are no longer all its pool's, so keeping
// part of them would take CPUs from it (its request read as the count),
// and no other container is moved. explain makes the reason of a
// confinement say which CPUs, why, and what to do. It is 0 and nil when
// the runtime shows an exact request or the record does not meet the
// bound (its size is then unknown, as at a creation).
func recordedAtLeast(c *api.Container, qos string, rec allocator.Assignment, why error) (int64, func(error) error) {
	milli, atLeast := milliCPU(c, qos)
	if !atLeast || !pools.IsExclusive(rec.Pool) || rec.MilliCPU < milli {
		return 0, nil
	}
	n := allocator.CPUsFor(rec.MilliCPU)
	explain := func(err error) error {
		err = fmt.Errorf("its CPUs %s cannot be had again (%v), and its record's request of %dm cannot be placed anew "+
			"(nri-cpupool lifted its CFS quota, so the runtime shows it only as at least 256 CPUs): %w", rec.CPUs, why, rec.MilliCPU, err)
		if allocator.ReasonOf(err) == allocator.ReasonPlacement {
			err = fmt.Errorf("%w; give pool %s room for %d CPUs (the CPUs the config gives it, or those other containers free)", err, rec.Pool, n)
		}
		return err
	}
	return rec.MilliCPU, explain
}
