package plugin

// A restart and a quota-lifted container ("at least 256 CPUs"): the
// runtime's side of a set that is no grow of its record, a lost live
// shrink whose record cannot be had, and a record that cannot be had for
// another reason. What each decides is allocator/atleast.go's; here the
// bound is read from the runtime and the outcome logged.

import (
	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// atLeastNoGrow tells whether keepResized must leave a remembered
// container to repairAll without reading its set as a lost resize: the
// runtime shows its request only as "at least" milli (atLeast), and
// allocator.AtLeastNoGrow says its set (part) is no grow of its record.
func atLeastNoGrow(rec allocator.Assignment, part cpuset.CPUSet, milli int64, atLeast bool) bool {
	return atLeast && allocator.AtLeastNoGrow(rec, part, milli)
}

// keepLostShrink keeps where the runtime runs it a remembered exclusive
// container whose request the runtime shows only as "at least 256 CPUs"
// (the plugin lifted its quota) when repairKnown cannot pin it back on its
// record (why) and the CPUs it runs on read as a live shrink whose record
// a kill lost (allocator.AtLeastLostShrink). Once the record cannot be
// had, placing it anew cannot size it ("at least 256 CPUs" is no size)
// and confined 256 CPUs or more of work to infra, although it runs on CPUs
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
	rec := r.Assignment
	if !atLeast {
		return false, 0
	}
	shrunk := p.alloc.AtLeastLostShrink(rec, part, milli)
	if shrunk == 0 {
		return false, 0
	}
	who := rememberedRef(st)
	req, err := p.resizeRequest(pod, c, rec, shrunk, false)
	if err != nil {
		// Refused under the configuration now: judged by what its record
		// knows of its options, as keepResized judges a lost resize.
		req = recordedResizeRequest(rec, shrunk)
	}
	res, err := p.alloc.ReadmitResized(r, req)
	if err != nil {
		p.log.Warnf("synchronize: container %s runs on %d of its record's CPUs (%s) and cannot stay there either: %v", who, part.Size(), part, err)
		return false, shrunk
	}
	p.log.Warnf("synchronize: container %s runs on %d CPUs %s, of its record's %d CPUs %s, whose others cannot be had again (%v); "+
		"keeping it where it runs, its request read as %dm from them (its quota lifted, the runtime shows only at least 256 CPUs: a shrink whose record a kill lost)",
		who, part.Size(), res.Assignment.CPUs, rec.CPUs.Size(), rec.CPUs, why, shrunk)
	if res.Warning != "" {
		// Why its shared part runs off the shared pool.
		p.log.Warnf("synchronize: container %s: %s", who, res.Warning)
	}
	return true, 0
}

// recordedAtLeast is the request to place anew a remembered container
// whose record repairKnown cannot pin back (why) and that keepLostShrink
// did not keep, with explain for its confinement
// (allocator.AtLeastRecorded), when the runtime shows its request only as
// "at least" a bound (qos is its pod's QoS class) and it is exclusive;
// shrunk is what keepLostShrink read. It is 0 and nil when the runtime
// shows an exact request, the container is not exclusive, or its record
// does not meet the bound.
func recordedAtLeast(c *api.Container, qos string, rec allocator.Assignment, why error, shrunk int64) (int64, func(error) error) {
	milli, atLeast := milliCPU(c, qos)
	if !atLeast || !pools.IsExclusive(rec.Pool) {
		return 0, nil
	}
	return allocator.AtLeastRecorded(rec, milli, why, shrunk)
}
