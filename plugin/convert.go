package plugin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// milliCPU recovers the container's CPU request from what the kubelet
// passed down (see milliOf); qos is its pod's QoS class (qosClass).
func milliCPU(ctr *api.Container, qos string) (milli int64, atLeast bool) {
	return milliOf(ctr.GetLinux().GetResources().GetCpu(), qos)
}

// The bounds of the cpu.shares the kubelet passes (MinShares, MaxShares):
// 2 for no CPU request and for requests below 3m alike, 262144 for 256
// CPUs and every larger request alike. The kernel accepts no more shares.
const (
	kubeletMinShares = 2
	kubeletMaxShares = 1 << 18
	// kubeletMaxSharesMilli is the request kubeletMaxShares stands for.
	kubeletMaxSharesMilli = kubeletMaxShares * 1000 / 1024
)

// milliOf is a CPU request in milli-CPUs from a set of CPU resources (a
// creation's or an update's). cpu.shares is request*1024/1000, between the
// kubelet's bounds: at the least, no request is read; at the most, a
// Guaranteed container's request is its limit, the CFS quota/period, and
// any other's is only known to be at least 256 CPUs (atLeast). The limit
// never stands in for a request below the cap: it may be far above the
// request the scheduler counted. Only a container created without shares
// (by hand, with crictl, which leaves them out unless told; the kubelet
// always sets them) is sized by its limit. Values no kernel accepts are
// capped before any arithmetic, so nothing overflows into a small or
// negative request.
func milliOf(cpu *api.LinuxCPU, qos string) (milli int64, atLeast bool) {
	if cpu == nil {
		return 0, false
	}
	limit := limitMilli(cpu)
	shares := cpu.GetShares().GetValue()
	switch {
	case shares == 0:
		return limit, false
	case shares <= kubeletMinShares:
		return 0, false
	case shares < kubeletMaxShares:
		return (int64(shares)*1000 + 1023) / 1024, false
	case qos == allocator.QoSGuaranteed && limit >= kubeletMaxSharesMilli:
		return limit, false
	}
	return kubeletMaxSharesMilli, true
}

// limitMilli is the CFS quota/period limit in milli-CPUs, 0 for none.
func limitMilli(cpu *api.LinuxCPU) int64 {
	const maxPeriod = 1_000_000 // the kernel's bound
	quota, period := cpu.GetQuota().GetValue(), min(cpu.GetPeriod().GetValue(), maxPeriod)
	if quota > 0 && period > 0 {
		quota = min(quota, int64(cpulist.MaxCPUs+1)*int64(period))
		return (quota*1000 + int64(period) - 1) / int64(period)
	}
	return 0
}

// qosClass derives the pod's QoS class from its cgroup parent, where the
// kubelet encodes it (kubepods/burstable/pod..., kubepods-besteffort-pod...).
func qosClass(pod *api.PodSandbox) string {
	parent := strings.ToLower(pod.GetLinux().GetCgroupParent())
	switch {
	case parent == "":
		return ""
	case strings.Contains(parent, "besteffort"):
		return allocator.QoSBestEffort
	case strings.Contains(parent, "burstable"):
		return allocator.QoSBurstable
	default:
		return allocator.QoSGuaranteed
	}
}

// ignoredDeviceMajors are character devices without a parent device
// (memory, ttys, ptys, misc): looking them up only costs time.
var ignoredDeviceMajors = map[int64]bool{1: true, 4: true, 5: true, 10: true, 136: true}

// maxDeviceLookups bounds the sysfs reads for privileged containers, which
// are given every device of the host.
const maxDeviceLookups = 32

// deviceNUMA returns the NUMA nodes of the container's devices.
func (p *Plugin) deviceNUMA(ctr *api.Container) cpuset.CPUSet {
	var nodes []int
	lookups := 0
	for _, d := range ctr.GetLinux().GetDevices() {
		if (d.Type != "c" && d.Type != "b") || ignoredDeviceMajors[d.Major] {
			continue
		}
		if lookups++; lookups > maxDeviceLookups {
			break
		}
		node, err := p.devNodeNUMA(d.Path, d.Type, d.Major, d.Minor)
		if err == nil && node != sysfs.Unknown {
			nodes = append(nodes, node)
		}
	}
	if len(nodes) == 0 {
		return cpuset.CPUSet{} // empty without a map: most containers have no device of a node
	}
	return cpuset.New(nodes...)
}

// toContainer converts NRI's view of a container into the policy's.
func (p *Plugin) toContainer(pod *api.PodSandbox, ctr *api.Container) allocator.Container {
	qos := qosClass(pod)
	milli, atLeast := milliCPU(ctr, qos)
	return allocator.Container{
		ID:          ctr.GetId(),
		Pod:         podRef(pod),
		Name:        containerName(ctr),
		Annotations: pod.GetAnnotations(),
		QoS:         qos,
		MilliCPU:    milli,
		DeviceNUMA:  p.deviceNUMA(ctr),
		// The kubelet's shares at their cap: exclusive pools refuse it.
		MilliCPUAtLeast: atLeast,
	}
}

// containerNameLabel is the label the kubelet sets to the container's name.
// CRI-O takes the NRI container name from it rather than from the CRI
// metadata, so a container created without it (by hand, with crictl) has an
// empty name there.
const containerNameLabel = "io.kubernetes.container.name"

// containerName is the container's name within its pod, as the kubelet knows
// it: it keys the CPUs remembered for a restart, so it must not be empty.
// Without a name or the label, the container's id stands in (such a
// container is not recognized when it restarts, but never mistaken for
// another).
func containerName(ctr *api.Container) string {
	if n := ctr.GetName(); n != "" {
		return n
	}
	if n := ctr.GetLabels()[containerNameLabel]; n != "" {
		return n
	}
	return "id-" + ctr.GetId()
}

// cpuUpdate pins a running container to its assignment: its cpuset as
// runnable on the CPUs online now.
func cpuUpdate(a allocator.Assignment, online cpuset.CPUSet, pinMemory bool) *api.ContainerUpdate {
	u := &api.ContainerUpdate{}
	u.SetContainerId(a.ID)
	u.SetLinuxCPUSetCPUs(runnable(a.Cpuset(), online).String())
	if pinMemory && a.Mems.Size() > 0 {
		u.SetLinuxCPUSetMems(a.Mems.String())
	}
	// A container that is stopping must not fail the request that moved it.
	u.SetIgnoreFailure()
	return u
}

// runnable is the cpuset a container is sent: its record's CPUs less those
// that are offline. The record keeps them (an offline CPU stays its
// holder's, and giveBack sends it again when it comes back online), but
// cgroup v1 refuses a cpuset.cpus that names an offline CPU (it must lie
// within the parent's, which lost it: EINVAL), and updates are sent with
// IgnoreFailure, so the container would silently stay where it was. When
// none of them is online the record is sent as it is: an empty cpuset is
// never sent (the runtime reads it as no cpuset at all).
func runnable(cpus, online cpuset.CPUSet) cpuset.CPUSet {
	if cpus.IsSubsetOf(online) {
		return cpus // every CPU online: nothing is built
	}
	if on := cpus.Intersection(online); !on.IsEmpty() {
		return on
	}
	return cpus
}

// runnableState is a creation's record as its adjustment pins it: the
// cpuset, and the CPU lists its environment names, less the CPUs that
// are offline (runnable), which the record itself keeps: a container of
// the kubelet's devices or of a claim restarted while one of its CPUs is
// offline starts on the others.
func runnableState(st state.ContainerState, a allocator.Assignment, online cpuset.CPUSet) state.ContainerState {
	all := a.Cpuset()
	if all.IsSubsetOf(online) || all.Intersection(online).IsEmpty() {
		return st
	}
	st.CPUs = a.CPUs.Intersection(online).String()
	if a.WithShared {
		st.SharedCPUs = a.Shared.Intersection(online).String()
	}
	return st
}

// containerRef names a container in log lines and errors, the one way
// (allocator.PodRef.ContainerName): namespace/pod/container.
func containerRef(pod *api.PodSandbox, ctr *api.Container) string {
	return podRef(pod).ContainerName(containerName(ctr))
}

// podRef is the allocator's reference to a pod.
func podRef(pod *api.PodSandbox) allocator.PodRef {
	return allocator.PodRef{Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid()}
}

// rememberedPod is the allocator's reference to a remembered container's
// pod.
func rememberedPod(st state.ContainerState) allocator.PodRef {
	return allocator.PodRef{Namespace: st.PodNamespace, Name: st.PodName, UID: st.PodUID}
}

// rememberedRef names a remembered container the one way, as containerRef
// names a running one.
func rememberedRef(st state.ContainerState) string {
	return rememberedPod(st).ContainerName(st.Container)
}

func sortContainers(cs []*api.Container) {
	slices.SortFunc(cs, func(a, b *api.Container) int { return strings.Compare(a.GetId(), b.GetId()) })
}

func podsByID(pods []*api.PodSandbox) map[string]*api.PodSandbox {
	m := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		m[pod.GetId()] = pod
	}
	return m
}

// assignmentFromState reads a remembered assignment. clean is false when a
// set was malformed or named CPUs this node does not have (dropped, with a
// warning): the container must then be pinned again.
func (p *Plugin) assignmentFromState(id string, st state.ContainerState) (allocator.Assignment, bool) {
	what := "state of container " + rememberedRef(st)
	cpus, ok1 := p.keptOnPresent(st.CPUs, what+", cpus")
	// Its idle siblings: one hot-removed is merely gone.
	reserved, ok2, _ := p.presentCPUs(st.Reserved, what+", reserved")
	mems, err := cpulist.Parse(st.Mems)
	if err != nil {
		mems = cpuset.New()
	}
	// An earlier release made a container on the shared pool too a
	// partition root, which runs its threads only on its exclusive CPUs:
	// its threads on the shared pool lost it. It is no longer one (the
	// reconciler restores its cgroup's files), as a new container would
	// not be (allocator's partitionOrShared); restoreKnown says so.
	partition := st.IsolatedPartition && !st.WithShared
	memory, err := parseMemory(st.Memory)
	if err != nil {
		p.log.Warnf("%s, memory: %v; derived again from the runtime", what, err)
	}
	return allocator.Assignment{ID: id, Pod: rememberedPod(st),
		Container: st.Container, Pool: st.Pool, MilliCPU: st.MilliCPU, CPUs: cpus, Reserved: reserved, Mems: mems,
		Added: addedWithin(parseOrdered(st.Added), cpus), NoCPUQuota: st.NoCPUQuota, IsolateIRQs: st.IsolateIRQs,
		IsolatedPartition: partition, PowerClass: st.PowerClass, WithShared: st.WithShared,
		Shared: p.rememberedShared(st), Memory: memory, HideHyperthreads: st.HideHyperthreads,
		Rule: allocator.Rule{Kind: st.Rule, Detail: st.RuleDetail, DeviceNUMA: st.DeviceNUMA, FromHold: st.FromHold,
			OtherContainerKeys: st.OtherContainerKeys}}, ok1 && ok2
}

// addedWithin keeps the remembered order of added CPUs only for CPUs the
// assignment has: the file may name CPUs this node lacks.
func addedWithin(ids []int, cpus cpuset.CPUSet) []int {
	var out []int
	for _, id := range ids {
		if cpus.Contains(id) {
			out = append(out, id)
		}
	}
	return out
}

// nodeCPUs parses a CPU list from the state file or the runtime, bounded,
// and drops the CPUs this node does not have (a state file from another
// node, a hot-unplugged vCPU), saying so. clean is false if the list was
// malformed or anything was dropped. CPUs that are offline are kept: one
// the kernel took from a running container is still the container's
// (allocator.Readmit keeps it, held offline), and a runtime's cpuset that
// names one is no cpuset of another node.
func (p *Plugin) nodeCPUs(s, what string) (cpuset.CPUSet, bool) {
	set, parsed, dropped := p.presentCPUs(s, what)
	return set, parsed && dropped.IsEmpty()
}

// presentCPUs is nodeCPUs that tells the dropped CPUs apart from a
// malformed list. A running container's record that names a CPU this node
// does not have names one the hypervisor hot-removed under it (the runtime
// runs the container on this node; a state file of another node names no
// container this runtime runs), and the kernel already runs it on the CPUs
// left. Those are its CPUs (keptOnPresent), not damage that places the
// container anew on other CPUs. The runtime's cpuset that names one is
// still not where it is pinned (runtimeCPUs): it is pinned again, on the
// same CPUs (repairKnown), and the runtime's cpuset no longer names it.
func (p *Plugin) presentCPUs(s, what string) (set cpuset.CPUSet, parsed bool, dropped cpuset.CPUSet) {
	set, err := cpulist.Parse(s)
	if err != nil {
		p.sayOnce(fmt.Sprintf("%s: %v; ignored", what, err))
		return cpuset.New(), false, cpuset.New()
	}
	if unknown := p.alloc.Absent(set); !unknown.IsEmpty() {
		p.sayOnce(fmt.Sprintf("%s: CPUs %s are not on this node; dropped", what, unknown))
		return set.Difference(unknown), true, unknown
	}
	return set, true, cpuset.New()
}

// sayOnce warns of a damaged record once per Synchronize: a restart reads
// a record in several steps (the readmission order, the readmission, the
// resize check, the holds), and each step said it again. Called under the
// lock.
func (p *Plugin) sayOnce(warning string) {
	if p.saidDamage == nil {
		p.saidDamage = map[string]bool{}
	}
	if !p.saidDamage[warning] {
		p.saidDamage[warning] = true
		p.log.Warn(warning)
	}
}

// keptOnPresent is presentCPUs for a running container's record: clean
// when the list parsed and, if CPUs were dropped, some are left and every
// dropped one is in the kernel's possible mask (a slot a vCPU can be
// hot-removed from). One outside it (a record of a bigger node, a
// damaged file) is damage, as before: the container is placed anew.
func (p *Plugin) keptOnPresent(s, what string) (cpuset.CPUSet, bool) {
	set, parsed, dropped := p.presentCPUs(s, what)
	if !parsed || dropped.IsEmpty() {
		return set, parsed
	}
	return set, !set.IsEmpty() && dropped.IsSubsetOf(p.topo.PossibleCPUs())
}

// runtimeMems is the cpuset.mems the runtime reports for a container;
// empty when it has none or it is malformed (the allocator then takes its
// CPUs' nodes, and keeps only nodes it knows).
func runtimeMems(c *api.Container) cpuset.CPUSet {
	mems, err := cpulist.Parse(c.GetLinux().GetResources().GetCpu().GetMems())
	if err != nil {
		return cpuset.New()
	}
	return mems
}

// runtimeCPUs is the cpuset the runtime reports for a container. pinned is
// false when the container may run on every CPU: no cpuset (the runtime
// created it without our adjustment), a malformed one, or one naming CPUs
// this node does not have.
func (p *Plugin) runtimeCPUs(c *api.Container) (cpuset.CPUSet, bool) {
	s := c.GetLinux().GetResources().GetCpu().GetCpus()
	if s == "" {
		return cpuset.New(), false
	}
	set, clean := p.nodeCPUs(s, "runtime's cpuset of container "+c.GetId())
	return set, clean && !set.IsEmpty()
}
