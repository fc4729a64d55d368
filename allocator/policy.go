package allocator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// QoS classes, as the kubelet derives them.
const (
	QoSGuaranteed = "guaranteed"
	QoSBurstable  = "burstable"
	QoSBestEffort = "besteffort"
)

// Container is what the policy knows of a container about to be created;
// the plugin fills it from NRI, the simulator from its requests file.
type Container struct {
	ID          string
	Pod         PodRef
	Name        string
	Annotations map[string]string
	QoS         string
	MilliCPU    int64
	// MilliCPUAtLeast says MilliCPU is only a lower bound: the kubelet
	// passes every request of 256 CPUs or more as the same cpu.shares, and
	// nothing told this container's (a Guaranteed pod's limit would). The
	// exclusive pools, sized by the request, refuse it.
	MilliCPUAtLeast bool
	// DeviceNUMA are the NUMA nodes of the container's devices.
	DeviceNUMA cpuset.CPUSet
	// KubeletCPUs are the exclusive CPUs the kubelet allocated to the
	// container through the cpupool.dev/exclusive resource or a DRA claim,
	// if any; KubeletPool is their pool (empty: exclusive) and Claims names
	// the claims, for messages.
	KubeletCPUs cpuset.CPUSet
	KubeletPool string
	Claims      []string
	// Demand is what it asks of memory (numamem).
	Demand numamem.Demand
	// Pool, when set, is the pool the container already runs in (an
	// in-place resize): Request keeps it, and judges the annotations
	// against it, instead of the pool a creation's rules would choose now.
	Pool string
}

// DeviceResolver maps a sysfs device path to its NUMA node; the caller
// provides it so that the policy stays free of I/O.
type DeviceResolver func(path string) (int, error)

// Policy turns a container into a placement request.
type Policy struct {
	cfg *config.Config
	// numaLimit bounds NUMA node ids in annotations: one past the node's
	// highest NUMA node.
	numaLimit int
	// powerRefusals are the power classes containers may not have on
	// this node, with the reason (see SetPowerRefusals).
	powerRefusals map[string]string
	// empty is the empty set every request without NUMA nodes of its own
	// returns (empty, not nil: cpuset's Equals tells the two apart), made
	// once, not twice on the path of every creation's reply (issue 45).
	// No method of a CPUSet changes it, so the requests may share it.
	empty cpuset.CPUSet
}

// maxNUMANodes is the kernel's largest MAX_NUMNODES, the bound when the
// node is not known.
const maxNUMANodes = 1024

// NewPolicy returns the policy for a configuration on a node (nil: any
// node, NUMA ids below 1024).
func NewPolicy(cfg *config.Config, topo *sysfs.Topology) *Policy {
	p := &Policy{cfg: cfg, numaLimit: maxNUMANodes, empty: cpuset.New()}
	if topo != nil {
		p.numaLimit = 1
		for _, n := range topo.NUMANodes {
			p.numaLimit = max(p.numaLimit, n.ID+1)
		}
	}
	return p
}

// Request decides the pool and options of a container. It refuses unknown,
// malformed and unauthorized annotations instead of falling back to a pool
// the tenant did not ask for.
func (p *Policy) Request(c Container, resolve DeviceResolver) (Request, error) {
	var few [16]annotationPair
	ours, err := gatherOurs(c.Annotations, few[:0])
	if err != nil {
		return Request{}, err
	}
	// The annotations of ours are gathered once, here, and every lookup
	// below reads them (annotationView). No error below takes a's own
	// fields (its container's name: req.Container), so that few stays on
	// the stack.
	a := annotationView{container: c.Name, ours: ours}
	// NUMANodes is set below and PreferNUMA replaced before the request
	// is returned: no empty set is made here only to be replaced, on the
	// path of every creation's reply (issue 45).
	req := Request{ID: c.ID, Pod: c.Pod, Container: c.Name, MilliCPU: c.MilliCPU, Options: p.cfg.Allocation,
		PreferNUMA: c.DeviceNUMA, Demand: c.Demand}
	if c.KubeletCPUs.Size() > 0 {
		if err := p.kubeletPool(c, a); err != nil {
			return Request{}, err
		}
		req.Pool, req.CPUs, req.Rule = c.kubeletPool(), c.KubeletCPUs, kubeletRule(c)
	} else if req.Pool, req.Rule, req.NotAllowed, err = p.pool(c, a); err != nil {
		return Request{}, err
	}
	if c.Pool != "" {
		// A running container never changes pool: a resize to a request
		// the rules would send elsewhere (guaranteedExclusive with a
		// fractional one) keeps its pool, and the checks below are about
		// that pool. pool's refusals (a namespace no longer allowed) stand.
		req.Pool, req.NotAllowed = c.Pool, ""
	}
	if c.MilliCPUAtLeast && pools.IsExclusive(req.Pool) && req.CPUs.Size() == 0 {
		// A Guaranteed container gets here only without a CFS quota (its
		// kubelet runs with cpuCFSQuota: false, or the quota was lifted):
		// telling it to be Guaranteed would be false.
		fix := "make the pod Guaranteed (limits.cpu = requests.cpu)"
		if c.QoS == QoSGuaranteed {
			fix = fmt.Sprintf("this Guaranteed container has no CFS quota to read it from (its kubelet sets none with cpuCFSQuota: false), so its size is unknown; request the CPUs as the %s resource instead (kubelet.devicePlugin), which the kubelet counts", config.ResourceExclusive)
		}
		return Request{}, &Refusal{Reason: ReasonPlacement, Err: fmt.Errorf("pool %s gives whole CPUs by the container's CPU request, but the kubelet passes every request of %d CPUs or more alike (cpu.shares %d, its maximum), so it is read only from a Guaranteed pod's CPU limit (its CFS quota); %s",
			req.Pool, c.MilliCPU/1000, 1<<18, fix)}
	}
	if err := placementOptions(a, &req.Options); err != nil {
		return Request{}, err
	}
	if req.IsolateIRQs, err = p.irqIsolation(a, req.Pool); err != nil {
		return Request{}, err
	}
	if req.IsolatedPartition, err = p.isolatedPartition(a, req.Pool); err != nil {
		return Request{}, err
	}
	if req.PowerClass, err = p.powerClass(a, req.Pool); err != nil {
		return Request{}, err
	}
	if req.WithShared, err = p.withShared(c, a, req.Pool); err != nil {
		return Request{}, err
	}
	if err := partitionOrShared(a, &req); err != nil {
		return Request{}, err
	}
	if req.NUMANodes, err = p.numaNodes(a); err != nil {
		return Request{}, err
	}
	if !req.NUMANodes.IsEmpty() && req.CPUs.Size() > 0 {
		key, v, _ := a.lookup(AnnotationNUMA)
		if len(c.Claims) > 0 {
			return Request{}, &AnnotationError{key, v, "the CPUs come from the container's ResourceClaim; choose their NUMA node in the claim (a selector or matchAttribute on resource.kubernetes.io/numaNode) instead"}
		}
		return Request{}, &AnnotationError{key, v, fmt.Sprintf("the kubelet chose the CPUs of %s; align them with its Topology Manager instead", config.ResourceExclusive)}
	}
	devices, err := deviceNodes(a, resolve)
	if err != nil {
		return Request{}, err
	}
	if req.PreferNUMA.IsEmpty() && devices.IsEmpty() {
		req.PreferNUMA = p.empty // empty, never nil, even from two zero sets
	} else {
		req.PreferNUMA = req.PreferNUMA.Union(devices) // a new set
	}
	if pools.IsExclusive(req.Pool) && !req.PreferNUMA.IsEmpty() {
		req.Rule.DeviceNUMA = req.PreferNUMA.String()
	}
	if err := numaNodesFitPool(a, req); err != nil {
		return Request{}, err
	}
	return req, nil
}

// pool is the pool the annotation asks for, when the namespace may use it
// and the container can be sized for it; else the default pool. The rule
// says which; notAllowed is the pool the QoS rule would have given, when
// allowedNamespaces kept the container out of it (defaultPool).
func (p *Policy) pool(c Container, a annotationView) (pool string, rule Rule, notAllowed string, err error) {
	key, v, ok := a.lookup(AnnotationPool)
	if !ok {
		return p.defaultPool(c)
	}
	pool = strings.TrimSpace(v)
	if !pools.Known(pool) {
		return "", Rule{}, "", &AnnotationError{key, v, "unknown pool; use one of " + strings.Join(pools.Names(), ", ")}
	}
	if !p.Allowed(pool, c.Pod.Namespace) {
		return "", Rule{}, "", &AnnotationError{key, v, fmt.Sprintf("namespace %q may not use pool %s (allowedNamespaces.%s: %v)", c.Pod.Namespace, pool, pool, p.cfg.AllowedNamespaces[pool])}
	}
	if pools.IsExclusive(pool) && p.cfg.DRA.Enabled {
		return "", Rule{}, "", &AnnotationError{key, v, fmt.Sprintf("with the DRA driver on, pool %s is given only through ResourceClaims; use a claim of DeviceClass cpupool-%s in the pod's resourceClaims instead", pool, pool)}
	}
	if pool == pools.Exclusive && p.cfg.Kubelet.DevicePlugin {
		return "", Rule{}, "", &AnnotationError{key, v, fmt.Sprintf("with the kubelet device plugin on, the exclusive pool is given only through the resource; request %s: N in resources.limits instead (or use exclusive-non-isolcpus)", config.ResourceExclusive)}
	}
	if pools.IsExclusive(pool) && c.MilliCPU <= 0 {
		return "", Rule{}, "", &AnnotationError{key, v, "the exclusive size is the container's CPU request, and it requests no CPU (the kubelet passes requests below 3m as none); set resources.requests.cpu"}
	}
	return pool, Rule{Kind: RuleAnnotation, Detail: annotationDetail(key, v)}, "", nil
}

// annotationDetail is a pool annotation's rule detail, "key=value": for
// the pod-wide keys with a pool's name as the value, as most pods write
// it, a constant, not a string made on the path of every creation's
// reply (issue 45).
func annotationDetail(key, v string) string {
	const bare, pod = AnnotationPool + "=", AnnotationPool + "/" + scopePod + "="
	switch {
	case key == AnnotationPool && v == pools.Exclusive:
		return bare + pools.Exclusive
	case key == AnnotationPool && v == pools.ExclusiveNonIsolcpus:
		return bare + pools.ExclusiveNonIsolcpus
	case key == AnnotationPool && v == pools.Shared:
		return bare + pools.Shared
	case key == AnnotationPool && v == pools.Infra:
		return bare + pools.Infra
	case key == AnnotationPool+"/"+scopePod && v == pools.Exclusive:
		return pod + pools.Exclusive
	case key == AnnotationPool+"/"+scopePod && v == pools.ExclusiveNonIsolcpus:
		return pod + pools.ExclusiveNonIsolcpus
	case key == AnnotationPool+"/"+scopePod && v == pools.Shared:
		return pod + pools.Shared
	case key == AnnotationPool+"/"+scopePod && v == pools.Infra:
		return pod + pools.Infra
	}
	return key + "=" + v
}

// kubeletPool is the pool of the CPUs the kubelet allocated.
func (c Container) kubeletPool() string {
	if c.KubeletPool == "" {
		return pools.Exclusive
	}
	return c.KubeletPool
}

// kubeletPool checks a container of the cpupool.dev/exclusive resource or
// of a DRA claim: the resource or the claim decides the pool, and a pool
// annotation may only agree with it.
func (p *Policy) kubeletPool(c Container, a annotationView) error {
	pool := c.kubeletPool()
	what := "requests " + config.ResourceExclusive
	quota := "a ResourceQuota on " + config.ResourceExclusive
	if len(c.Claims) > 0 {
		what = "uses ResourceClaims of pool " + pool + " (" + strings.Join(c.Claims, ", ") + ")"
		quota = "a ResourceQuota on the DeviceClass cpupool-" + pool
	}
	if key, v, ok := a.lookup(AnnotationPool); ok && strings.TrimSpace(v) != pool {
		return &AnnotationError{key, v, fmt.Sprintf("the container %s, which is the %s pool; remove the annotation", what, pool)}
	}
	if !p.Allowed(pool, c.Pod.Namespace) {
		return &Refusal{Reason: ReasonNamespace, Err: fmt.Errorf("namespace %q may not use pool %s (allowedNamespaces.%s: %v); %s refuses such pods before they are scheduled",
			c.Pod.Namespace, pool, pool, p.cfg.AllowedNamespaces[pool], quota)}
	}
	return nil
}

// placementOptions applies the boolean annotations over the config's
// placement options.
func placementOptions(a annotationView, opts *config.Allocation) error {
	// One call per option, not a table of pointers into opts: such a
	// table made the caller's whole Request escape to the heap, one
	// allocation more on the path of every creation's reply (issue 45).
	if err := boolOption(a, AnnotationHideHyperthreads, &opts.HideHyperthreads); err != nil {
		return err
	}
	if err := boolOption(a, AnnotationFullPCPUsOnly, &opts.FullPCPUsOnly); err != nil {
		return err
	}
	if err := boolOption(a, AnnotationDistributeAcrossNUMA, &opts.DistributeAcrossNUMA); err != nil {
		return err
	}
	return boolOption(a, AnnotationDisableCPUQuota, &opts.DisableCPUQuota)
}

// boolOption sets *dst to the boolean annotation key, if the container
// has it.
func boolOption(a annotationView, key string, dst *bool) error {
	key, v, ok := a.lookup(key)
	if !ok {
		return nil
	}
	val, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return &AnnotationError{key, v, "not a boolean; use true or false"}
	}
	*dst = val
	return nil
}

// irqIsolation decides whether device IRQs are kept off an exclusive
// container's CPUs: the pool's irqIsolation mode, and the annotation where
// the mode lets the pod choose. Asking for what the pool does not offer is
// an error, not ignored. The pool's namespace rules have already admitted
// the container to the pool.
func (p *Policy) irqIsolation(a annotationView, pool string) (bool, error) {
	key, v, annotated := a.lookup(AnnotationIRQIsolation)
	want := false
	if annotated {
		var err error
		if want, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return false, &AnnotationError{key, v, "not a boolean; use true or false"}
		}
	}
	mode := p.cfg.IRQIsolation(pool)
	if !pools.IsExclusive(pool) {
		if annotated && want {
			why := "IRQ isolation is for containers with exclusive CPUs, and the container goes to " + pool
			if mode == config.IRQIsolationAlways {
				why += ", whose CPUs are kept free of IRQs anyway (pools." + pool + ".irqIsolation: always)"
			}
			return false, &AnnotationError{key, v, why}
		}
		return false, nil
	}
	switch mode {
	case config.IRQIsolationOptIn:
		return want, nil
	case config.IRQIsolationOptOut:
		return !annotated || want, nil
	case config.IRQIsolationAlways:
		if annotated && !want {
			return false, &AnnotationError{key, v, fmt.Sprintf("pool %s keeps its CPUs free of IRQs for every container (pools.%s.irqIsolation: always)", pool, pool)}
		}
		return true, nil
	}
	if annotated && want {
		return false, &AnnotationError{key, v, fmt.Sprintf("pool %s does not offer IRQ isolation (pools.%s.irqIsolation is off); the node's operator can set it to optIn", pool, pool)}
	}
	return false, nil
}

// isolatedPartition decides whether an exclusive container's cgroup
// becomes an isolated partition, like irqIsolation (without always).
func (p *Policy) isolatedPartition(a annotationView, pool string) (bool, error) {
	key, v, annotated := a.lookup(AnnotationIsolatedPartition)
	want := false
	if annotated {
		var err error
		if want, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return false, &AnnotationError{key, v, "not a boolean; use true or false"}
		}
	}
	if !pools.IsExclusive(pool) {
		if annotated && want {
			return false, &AnnotationError{key, v, "an isolated partition is for containers with exclusive CPUs, and the container goes to " + pool}
		}
		return false, nil
	}
	switch p.cfg.IsolatedPartition(pool) {
	case config.IRQIsolationOptIn:
		return want, nil
	case config.IRQIsolationOptOut:
		return !annotated || want, nil
	}
	if annotated && want {
		return false, &AnnotationError{key, v, fmt.Sprintf("pool %s does not offer isolated partitions (pools.%s.isolatedPartition is off); the node's operator can set it to optIn", pool, pool)}
	}
	return false, nil
}

// partitionOrShared settles an exclusive container that would be both an
// isolated partition and on the shared pool. The kernel runs a valid
// partition root's threads only on its exclusive CPUs, the exclusive part:
// the threads on the shared pool would lose it, and sched_setaffinity to
// CPUPOOL_SHARED_CPUS would fail. A container that asks for both with its
// annotations is refused, naming both, as keeping its CFS quota with the
// shared pool is (withShared): the tenant chooses. One whose partition is
// only its pool's default (isolatedPartition: optOut) asked for the shared
// pool and not for the partition: it runs without one (PartitionSkipped;
// the plugin warns and counts it).
func partitionOrShared(a annotationView, req *Request) error {
	if !req.WithShared || !req.IsolatedPartition {
		return nil
	}
	sk, sv, _ := a.lookup(AnnotationSharedCPUs)
	if key, v, asked := a.lookup(AnnotationIsolatedPartition); asked {
		return &AnnotationError{key, v, fmt.Sprintf("the kernel runs an isolated partition's threads only on its exclusive CPUs, so the container would lose the shared pool that %s=%s adds to them; choose one: remove one of the two annotations, or set %s/container.%s: \"false\"",
			sk, cpulist.Echo(sv), AnnotationIsolatedPartition, req.Container)}
	}
	req.IsolatedPartition, req.PartitionSkipped = false, true
	return nil
}

// numaNodes are the NUMA nodes the annotation restricts the container to;
// empty without the annotation.
func (p *Policy) numaNodes(a annotationView) (cpuset.CPUSet, error) {
	key, v, ok := a.lookup(AnnotationNUMA)
	if !ok {
		return p.empty, nil
	}
	nodes, err := cpulist.ParseBelow(v, p.numaLimit)
	if err != nil || nodes.IsEmpty() {
		return cpuset.New(), &AnnotationError{key, v, fmt.Sprintf("not a NUMA node list of this node (nodes 0-%d); write e.g. \"0\" or \"0,1\"", p.numaLimit-1)}
	}
	return nodes, nil
}

// numaNodesFitPool refuses a NUMA restriction for a pool that is not
// exclusive: a shared pool's CPUs are not chosen per container.
func numaNodesFitPool(a annotationView, req Request) error {
	if req.NUMANodes.IsEmpty() || pools.IsExclusive(req.Pool) {
		return nil
	}
	key, v, _ := a.lookup(AnnotationNUMA)
	return &AnnotationError{key, v, fmt.Sprintf("applies to exclusive pools only, and the container goes to %s", req.Pool)}
}

// deviceNodes are the NUMA nodes of the devices the annotation names, to
// prefer; nodes the firmware does not report are left out.
func deviceNodes(a annotationView, resolve DeviceResolver) (cpuset.CPUSet, error) {
	key, v, ok := a.lookup(AnnotationDevice)
	if !ok {
		return cpuset.CPUSet{}, nil // empty, only for Request's Union: nothing to allocate
	}
	var nodes []int
	for _, path := range strings.Split(v, ",") {
		path = strings.TrimSpace(path)
		if resolve == nil {
			return cpuset.New(), &AnnotationError{key, v, "device locality cannot be resolved here"}
		}
		node, err := resolve(path)
		if err != nil {
			// The reason (missing, unreadable, no numa_node) stays in the
			// caller's log: telling the tenant would let it probe which
			// host paths exist.
			return cpuset.New(), &AnnotationError{key, v, fmt.Sprintf("device %s is not a sysfs device with a known NUMA node on this node", cpulist.Echo(path))}
		}
		if node >= 0 {
			nodes = append(nodes, node)
		}
	}
	return cpuset.New(nodes...), nil
}

// defaultPool applies the kubelet static policy's rule when enabled:
// whole-CPU requests of Guaranteed pods are exclusive.
//
// With the kubelet device plugin on, the exclusive pool belongs to the
// resource, so the rule uses exclusive-non-isolcpus (CPUs lent by infra,
// which the scheduler counts in allocatable cpu) when it is enabled.
//
// A container the rule would make exclusive in a namespace the pool's
// allowedNamespaces leaves out goes to the default pool, as the kubelet's
// shared pool would take a pod the CPU manager cannot give exclusive
// CPUs; but not silently: notAllowed names the pool, and the rule says
// why, for the plugin's Event and for explain.
func (p *Policy) defaultPool(c Container) (pool string, rule Rule, notAllowed string, err error) {
	if p.cfg.DRA.Enabled {
		// Both exclusive pools belong to the claims.
		return p.cfg.DefaultPool, defaultRule, "", nil
	}
	pool = pools.Exclusive
	if p.cfg.Kubelet.DevicePlugin {
		if !p.cfg.Pools.ExclusiveNonIsolcpus.Enabled {
			return p.cfg.DefaultPool, defaultRule, "", nil
		}
		pool = pools.ExclusiveNonIsolcpus
	}
	if !p.cfg.GuaranteedExclusive || c.QoS != QoSGuaranteed || c.MilliCPU <= 0 || c.MilliCPU%1000 != 0 {
		return p.cfg.DefaultPool, defaultRule, "", nil
	}
	if !p.Allowed(pool, c.Pod.Namespace) {
		return p.cfg.DefaultPool, notAllowedRule(pool), pool, nil
	}
	return pool, qosRule, "", nil
}

// Allowed tells whether a namespace may ask for a pool.
func (p *Policy) Allowed(pool, namespace string) bool {
	allowed, restricted := p.cfg.AllowedNamespaces[pool]
	if !restricted {
		return true
	}
	return slices.Contains(allowed, namespace) || slices.Contains(allowed, "*")
}

// Bounds on tenant-supplied annotation values, checked before anything
// else looks at them: a legal value is far below each.
const (
	// MaxAnnotationValue is the longest value of one of our annotations.
	MaxAnnotationValue = 512
	// MaxListItems bounds the items of a NUMA node list.
	MaxListItems = 64
	// MaxDevicePaths bounds the paths of a device annotation.
	MaxDevicePaths = 8
	// maxOurAnnotations bounds how many keys of our domain a pod may set
	// (six keys, each at three scopes, for a handful of containers).
	maxOurAnnotations = 128
	// maxAnnotationKey is the longest key of ours (Kubernetes allows a
	// 63-byte name after the prefix; container names are 63 bytes).
	maxAnnotationKey = 256
)

// CheckAnnotations refuses, in time proportional to the annotations' size,
// keys in our domain that we do not know (so a typo such as
// "pool.cpupool.dev/containr.x" is an error, not ignored) and values beyond
// the bounds above. It needs no configuration, so callers run it before
// taking any lock.
func CheckAnnotations(ann map[string]string) error {
	var few [16]annotationPair
	_, err := gatherOurs(ann, few[:0])
	return err
}

// gatherOurs is CheckAnnotations that also returns the annotations of our
// domain, appended to ours, sorted by key: a pod has a few, kept by the
// callers in an array on the stack, not allocated, as this runs twice on
// the path of every creation's reply (before the lock, and again in
// Request; issue 45).
func gatherOurs(ann map[string]string, ours []annotationPair) ([]annotationPair, error) {
	for k, v := range ann {
		if OurAnnotation(k) {
			if len(ours) == maxOurAnnotations {
				return nil, &AnnotationError{k, v, fmt.Sprintf("more than %d annotations of %s", maxOurAnnotations, AnnotationDomain)}
			}
			ours = append(ours, annotationPair{k, v})
		}
	}
	slices.SortFunc(ours, func(a, b annotationPair) int { return strings.Compare(a.key, b.key) })
	for _, kv := range ours {
		k, v := kv.key, kv.value
		if len(k) > maxAnnotationKey {
			return nil, &AnnotationError{k, v, fmt.Sprintf("key of %d bytes; at most %d are accepted", len(k), maxAnnotationKey)}
		}
		base, scope, _ := strings.Cut(k, "/")
		if !slices.Contains(knownAnnotations, base) {
			return nil, &AnnotationError{k, v, "unknown annotation; known keys are " + knownKeys()}
		}
		_, name, scoped := ContainerScoped(k)
		if scope != "" && scope != scopePod && !scoped {
			return nil, &AnnotationError{k, v, "unknown scope " + cpulist.Echo(scope) + "; use <key>, <key>/pod or <key>/container.<name>"}
		}
		if scoped && !isDNSLabel(name) {
			// No container of any pod has this name (Kubernetes names
			// containers with DNS labels), so the key could only ever
			// be ignored: a typo ("container.Web", "container.my_app").
			return nil, &AnnotationError{k, v, "names a container no pod can have: container names are lower-case letters, digits and '-', at most 63 bytes, starting and ending with a letter or digit"}
		}
		if len(v) > MaxAnnotationValue {
			return nil, &AnnotationError{k, v, fmt.Sprintf("%d bytes; at most %d are accepted", len(v), MaxAnnotationValue)}
		}
		switch base {
		case AnnotationNUMA:
			if n := strings.Count(v, ",") + 1; n > MaxListItems {
				return nil, &AnnotationError{k, v, fmt.Sprintf("%d list items; at most %d are accepted", n, MaxListItems)}
			}
		case AnnotationDevice:
			if n := strings.Count(v, ",") + 1; n > MaxDevicePaths {
				return nil, &AnnotationError{k, v, fmt.Sprintf("%d device paths; at most %d are accepted", n, MaxDevicePaths)}
			}
		case AnnotationPowerClass:
			if n := len(strings.TrimSpace(v)); n == 0 || n > config.MaxPowerClassName {
				return nil, &AnnotationError{k, v, fmt.Sprintf("not a power class name (1 to %d bytes)", config.MaxPowerClassName)}
			}
		}
	}
	return ours, nil
}

// knownKeys lists the known keys for an error, short: the domain once.
func knownKeys() string {
	names := make([]string, len(knownAnnotations))
	for i, k := range knownAnnotations {
		names[i] = strings.TrimSuffix(k, "."+AnnotationDomain)
	}
	return "{" + strings.Join(names, ",") + "}." + AnnotationDomain
}

// kubeletRule is the rule of a container whose CPUs the kubelet or a
// claim chose.
func kubeletRule(c Container) Rule {
	if len(c.Claims) > 0 {
		return Rule{Kind: RuleClaim, Detail: "ResourceClaims " + strings.Join(c.Claims, ", ")}
	}
	return Rule{Kind: RuleDevicePlugin, Detail: "resources.limits " + config.ResourceExclusive}
}

// powerClass decides an exclusive container's power class: its pool's
// class, or the one its annotation chooses among those the pool allows.
// Shared and infra containers have none of their own: their CPUs have
// their pool's class. Under power.unsupported: refuse, a class this node
// cannot apply in full is refused.
func (p *Policy) powerClass(a annotationView, pool string) (string, error) {
	key, v, annotated := a.lookup(AnnotationPowerClass)
	pp := p.cfg.PowerPool(pool)
	if !annotated {
		if !pools.IsExclusive(pool) {
			return "", nil
		}
		if why, refused := p.powerRefusals[pp.Class]; refused {
			return "", &Refusal{Reason: ReasonPower, Err: fmt.Errorf("the power class %s of pool %s (power.pools.%s.class) cannot be applied on this node: %s (power.unsupported: refuse)", pp.Class, pool, pool, why)}
		}
		return pp.Class, nil
	}
	class := strings.TrimSpace(v)
	if !pools.IsExclusive(pool) {
		why := "a power class is chosen for a container's exclusive CPUs, and the container goes to " + pool
		if pp.Class != "" {
			why += fmt.Sprintf(", whose CPUs have the pool's class %s", pp.Class)
		}
		return "", &AnnotationError{key, v, why}
	}
	if !p.cfg.PowerAllows(pool, class) {
		allowed := slices.Clone(pp.Allowed)
		if pp.Class != "" {
			allowed = append([]string{pp.Class}, allowed...)
		}
		if len(allowed) == 0 {
			return "", &AnnotationError{key, v, fmt.Sprintf("pool %s offers no power classes (power.pools.%s); the node's operator can add some", pool, pool)}
		}
		return "", &AnnotationError{key, v, fmt.Sprintf("pool %s offers the power classes %s (power.pools.%s)", pool, strings.Join(allowed, ", "), pool)}
	}
	if why, refused := p.powerRefusals[class]; refused {
		return "", &Refusal{Reason: ReasonPower, Err: &AnnotationError{key, v, fmt.Sprintf("this node cannot apply the class: %s (power.unsupported: refuse)", why)}}
	}
	return class, nil
}

// withShared decides whether an exclusive container also runs on the
// shared pool: it asks with the annotation, and may use the shared pool
// (allowedNamespaces.shared). Its CFS quota is lifted (withSharedPart):
// asking to keep it is refused.
func (p *Policy) withShared(c Container, a annotationView, pool string) (bool, error) {
	key, v, annotated := a.lookup(AnnotationSharedCPUs)
	if !annotated {
		return false, nil
	}
	want, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, &AnnotationError{key, v, "not a boolean; use true or false"}
	}
	if !want {
		return false, nil
	}
	if !pools.IsExclusive(pool) {
		return false, &AnnotationError{key, v, "the shared pool is added to a container's exclusive CPUs, and the container goes to " + pool + " (use pool.cpupool.dev: shared for the shared pool alone)"}
	}
	if !p.Allowed(pools.Shared, c.Pod.Namespace) {
		return false, &AnnotationError{key, v, fmt.Sprintf("namespace %q may not use pool shared (allowedNamespaces.shared: %v)", c.Pod.Namespace, p.cfg.AllowedNamespaces[pools.Shared])}
	}
	if qk, qv, ok := a.lookup(AnnotationDisableCPUQuota); ok {
		if lift, err := strconv.ParseBool(strings.TrimSpace(qv)); err == nil && !lift {
			return false, &AnnotationError{key, v, fmt.Sprintf("the container's CFS quota would throttle its exclusive CPUs' threads whenever its shared CPUs' threads are busy (one quota covers the whole container), so it is always lifted with the shared pool; remove %s=%s", qk, cpulist.Echo(qv))}
		}
	}
	return true, nil
}
