package allocator

// A restart and a quota-lifted exclusive container: the runtime shows its
// request only as "at least" a bound (its cpu.shares are at their cap and
// no CFS quota says more: the plugin lifted it, or its kubelet sets none),
// so the request is no size. What a remembered container's set and record
// say of its size then is decided here; the plugin reads the bound from
// the runtime, logs, and pins.

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// AtLeastNoGrow tells whether a remembered container whose request the
// runtime shows only as at least milli, which its record rec meets, runs
// on a set that is no grow of its record (part is its exclusive part
// there). Such a set says nothing of a request: it is left to be pinned
// back on its record, never read as a lost resize. Judged as a resize to
// the bound, it was logged as one, with the advice for a kubelet without
// a CFS quota, for a container no resize touched.
func AtLeastNoGrow(rec Assignment, part cpuset.CPUSet, milli int64) bool {
	return rec.MilliCPU >= milli && (part.Size() <= rec.CPUs.Size() || !rec.CPUs.IsSubsetOf(part))
}

// AtLeastLostShrink returns the request a remembered exclusive container
// whose request the runtime shows only as at least milli reads from the
// CPUs it runs on (part, its exclusive part), when its record cannot be
// pinned back and that set is what a live shrink whose record a kill lost
// gives: part of its record's CPUs, at least milli's worth (whole CPUs,
// 1000m each), and the rest cannot be had again because another container
// runs on them (the CPUs the shrink gave back, placed since) and none of
// them is offline (GivenAway). It is 0 for any other set: a record CPU
// offline, or a pool that no longer has them, is no shrink, and reading
// one rewrote the request of a container no resize touched. A shrink
// cgroup v1 made (CPUs offline and back while the plugin was down) looks
// the same, which is why this is asked only once the record cannot be
// had. The caller keeps it where it runs by that request
// (ReadmitResized), or, where it cannot stay, places it by that request
// and not by its record's stale larger one (AtLeastRecorded).
func (a *Allocator) AtLeastLostShrink(rec Assignment, part cpuset.CPUSet, milli int64) int64 {
	n := int64(part.Size())
	if rec.MilliCPU < milli || n*1000 < milli || n >= int64(rec.CPUs.Size()) || !part.IsSubsetOf(rec.CPUs) {
		return 0
	}
	if !a.GivenAway(rec, part) {
		// The record could not be pinned back for another reason than
		// CPUs the shrink gave back and another now has: that is no
		// shrink, and its request is not the count.
		return 0
	}
	return n * 1000
}

// AtLeastRecorded is the request to place anew a remembered exclusive
// container (record rec) that cannot be pinned back on its record (why)
// nor kept where it runs, whose request the runtime shows only as at
// least milli, when its record's request meets that bound: the record is
// the one place its size is still known, and the runtime's bound agrees
// with it. shrunk, when not 0, is the request AtLeastLostShrink read from
// the CPUs it runs on (a live shrink whose record a kill lost, and that
// cannot stay there): the kubelet's current request, so it is placed by
// that and not by the record's stale larger one. Without it, the policy
// could not size it and it was confined to infra, its 256 CPUs or more of
// work on the infra CPUs. Placed by it, it is treated as an exact-request
// container whose record cannot be had is (Adopt): it keeps the CPUs it
// runs on that are still free and its pool's, and gets the rest where the
// pool can give them; no other container is moved. explain makes the
// reason of a confinement say which CPUs cannot be had and why, that
// placing it anew was refused and why (the cause), where its size came
// from (background only: the quota is never why a known request cannot
// be placed), and, for a placement that found no room, what to do. It is
// 0 and nil when the record does not meet the bound (its size is then
// unknown, as at a creation).
func AtLeastRecorded(rec Assignment, milli int64, why error, shrunk int64) (int64, func(error) error) {
	if rec.MilliCPU < milli {
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
	n := CPUsFor(size)
	explain := func(err error) error {
		err = fmt.Errorf("its CPUs %s cannot be had again (%v), and %s of %dm cannot be placed anew: %w "+
			"(its size is known from that; %s and the runtime shows only at least 256 CPUs)", rec.CPUs, why, source, size, err, bound)
		if ReasonOf(err) == ReasonPlacement {
			err = fmt.Errorf("%w; give pool %s room for %d CPUs (the CPUs the config gives it, or those other containers free)", err, rec.Pool, n)
		}
		return err
	}
	return size, explain
}
