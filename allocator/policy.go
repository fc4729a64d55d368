package allocator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
)

// Annotation keys. Each is looked up the NRI way: "<key>/container.<name>"
// first, then "<key>/pod", then "<key>".
const (
	AnnotationDomain               = "cpupool.dev"
	AnnotationPool                 = "pool.cpupool.dev"
	AnnotationNUMA                 = "numa.cpupool.dev"
	AnnotationDevice               = "device.cpupool.dev"
	AnnotationHideHyperthreads     = "hide-hyperthreads.cpupool.dev"
	AnnotationFullPCPUsOnly        = "full-pcpus-only.cpupool.dev"
	AnnotationDistributeAcrossNUMA = "distribute-across-numa.cpupool.dev"
	AnnotationDisableCPUQuota      = "disable-cpu-quota.cpupool.dev"
)

var knownAnnotations = []string{AnnotationPool, AnnotationNUMA, AnnotationDevice, AnnotationHideHyperthreads, AnnotationFullPCPUsOnly, AnnotationDistributeAcrossNUMA,
	AnnotationDisableCPUQuota}

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
	// DeviceNUMA are the NUMA nodes of the container's devices.
	DeviceNUMA cpuset.CPUSet
	// KubeletCPUs are the exclusive CPUs the kubelet allocated to the
	// container through the cpupool.dev/exclusive resource, if any.
	KubeletCPUs cpuset.CPUSet
}

// DeviceResolver maps a sysfs device path to its NUMA node; the caller
// provides it so that the policy stays free of I/O.
type DeviceResolver func(path string) (int, error)

// Policy turns a container into a placement request.
type Policy struct {
	cfg *config.Config
}

// NewPolicy returns the policy for a configuration.
func NewPolicy(cfg *config.Config) *Policy { return &Policy{cfg: cfg} }

// AnnotationError is a tenant's annotation the policy refuses.
type AnnotationError struct {
	Key, Value, Reason string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s=%q: %s", e.Key, e.Value, e.Reason)
}

// lookup finds an annotation for a container the NRI way and returns the
// key that matched.
func lookup(ann map[string]string, key, container string) (string, string, bool) {
	for _, k := range []string{key + "/container." + container, key + "/pod", key} {
		if v, ok := ann[k]; ok {
			return k, v, true
		}
	}
	return "", "", false
}

// Request decides the pool and options of a container. It refuses unknown,
// malformed and unauthorized annotations instead of falling back to a pool
// the tenant did not ask for.
func (p *Policy) Request(c Container, resolve DeviceResolver) (Request, error) {
	if err := checkAnnotationKeys(c.Annotations); err != nil {
		return Request{}, err
	}
	req := Request{ID: c.ID, Pod: c.Pod, Container: c.Name, MilliCPU: c.MilliCPU, Options: p.cfg.Allocation,
		NUMANodes: cpuset.New(), PreferNUMA: c.DeviceNUMA}
	if req.PreferNUMA.Size() == 0 {
		req.PreferNUMA = cpuset.New()
	}
	var err error
	if c.KubeletCPUs.Size() > 0 {
		if err := p.kubeletPool(c); err != nil {
			return Request{}, err
		}
		req.Pool, req.CPUs = pools.Exclusive, c.KubeletCPUs
	} else if req.Pool, err = p.pool(c); err != nil {
		return Request{}, err
	}
	if err := placementOptions(c, &req.Options); err != nil {
		return Request{}, err
	}
	if req.NUMANodes, err = numaNodes(c); err != nil {
		return Request{}, err
	}
	if !req.NUMANodes.IsEmpty() && req.CPUs.Size() > 0 {
		key, v, _ := lookup(c.Annotations, AnnotationNUMA, c.Name)
		return Request{}, &AnnotationError{key, v, fmt.Sprintf("the kubelet chose the CPUs of %s; align them with its Topology Manager instead", config.ResourceExclusive)}
	}
	devices, err := deviceNodes(c, resolve)
	if err != nil {
		return Request{}, err
	}
	req.PreferNUMA = req.PreferNUMA.Union(devices)
	if err := numaNodesFitPool(c, req); err != nil {
		return Request{}, err
	}
	return req, nil
}

// pool is the pool the annotation asks for, when the namespace may use it
// and the container can be sized for it; else the default pool.
func (p *Policy) pool(c Container) (string, error) {
	key, v, ok := lookup(c.Annotations, AnnotationPool, c.Name)
	if !ok {
		return p.defaultPool(c), nil
	}
	pool := strings.TrimSpace(v)
	if !pools.Known(pool) {
		return "", &AnnotationError{key, v, "unknown pool; use one of " + strings.Join(pools.Names(), ", ")}
	}
	if !p.Allowed(pool, c.Pod.Namespace) {
		return "", &AnnotationError{key, v, fmt.Sprintf("namespace %q may not use pool %s (allowedNamespaces.%s: %v)", c.Pod.Namespace, pool, pool, p.cfg.AllowedNamespaces[pool])}
	}
	if pool == pools.Exclusive && p.cfg.Kubelet.DevicePlugin {
		return "", &AnnotationError{key, v, fmt.Sprintf("with the kubelet device plugin on, the exclusive pool is given only through the resource; request %s: N in resources.limits instead (or use exclusive-non-isolcpus)", config.ResourceExclusive)}
	}
	if pools.IsExclusive(pool) && c.MilliCPU <= 0 {
		return "", &AnnotationError{key, v, "the exclusive size is the container's CPU request, and it requests no CPU; set resources.requests.cpu"}
	}
	return pool, nil
}

// kubeletPool checks a container of the cpupool.dev/exclusive resource: the
// resource decides the pool, and a pool annotation may only agree with it.
func (p *Policy) kubeletPool(c Container) error {
	if key, v, ok := lookup(c.Annotations, AnnotationPool, c.Name); ok && strings.TrimSpace(v) != pools.Exclusive {
		return &AnnotationError{key, v, fmt.Sprintf("the container requests %s, which is the exclusive pool; remove the annotation", config.ResourceExclusive)}
	}
	if !p.Allowed(pools.Exclusive, c.Pod.Namespace) {
		return fmt.Errorf("namespace %q may not use pool exclusive (allowedNamespaces.exclusive: %v); a ResourceQuota on %s refuses such pods before they are scheduled",
			c.Pod.Namespace, p.cfg.AllowedNamespaces[pools.Exclusive], config.ResourceExclusive)
	}
	return nil
}

// placementOptions applies the boolean annotations over the config's
// placement options.
func placementOptions(c Container, opts *config.Allocation) error {
	for _, b := range []struct {
		key string
		dst *bool
	}{
		{AnnotationHideHyperthreads, &opts.HideHyperthreads},
		{AnnotationFullPCPUsOnly, &opts.FullPCPUsOnly},
		{AnnotationDistributeAcrossNUMA, &opts.DistributeAcrossNUMA},
		{AnnotationDisableCPUQuota, &opts.DisableCPUQuota},
	} {
		if key, v, ok := lookup(c.Annotations, b.key, c.Name); ok {
			val, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return &AnnotationError{key, v, "not a boolean; use true or false"}
			}
			*b.dst = val
		}
	}
	return nil
}

// numaNodes are the NUMA nodes the annotation restricts the container to;
// empty without the annotation.
func numaNodes(c Container) (cpuset.CPUSet, error) {
	key, v, ok := lookup(c.Annotations, AnnotationNUMA, c.Name)
	if !ok {
		return cpuset.New(), nil
	}
	nodes, err := config.ParseCPUList(v)
	if err != nil || nodes.IsEmpty() {
		return cpuset.New(), &AnnotationError{key, v, "not a NUMA node list; write e.g. \"0\" or \"0,1\""}
	}
	return nodes, nil
}

// numaNodesFitPool refuses a NUMA restriction for a pool that is not
// exclusive: a shared pool's CPUs are not chosen per container.
func numaNodesFitPool(c Container, req Request) error {
	if req.NUMANodes.IsEmpty() || pools.IsExclusive(req.Pool) {
		return nil
	}
	key, v, _ := lookup(c.Annotations, AnnotationNUMA, c.Name)
	return &AnnotationError{key, v, fmt.Sprintf("applies to exclusive pools only, and the container goes to %s", req.Pool)}
}

// deviceNodes are the NUMA nodes of the devices the annotation names, to
// prefer; nodes the firmware does not report are left out.
func deviceNodes(c Container, resolve DeviceResolver) (cpuset.CPUSet, error) {
	key, v, ok := lookup(c.Annotations, AnnotationDevice, c.Name)
	if !ok {
		return cpuset.New(), nil
	}
	var nodes []int
	for _, path := range strings.Split(v, ",") {
		path = strings.TrimSpace(path)
		if resolve == nil {
			return cpuset.New(), &AnnotationError{key, v, "device locality cannot be resolved here"}
		}
		node, err := resolve(path)
		if err != nil {
			return cpuset.New(), &AnnotationError{key, v, err.Error()}
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
func (p *Policy) defaultPool(c Container) string {
	pool := pools.Exclusive
	if p.cfg.Kubelet.DevicePlugin {
		if !p.cfg.Pools.ExclusiveNonIsolcpus.Enabled {
			return p.cfg.DefaultPool
		}
		pool = pools.ExclusiveNonIsolcpus
	}
	if p.cfg.GuaranteedExclusive && c.QoS == QoSGuaranteed && c.MilliCPU > 0 && c.MilliCPU%1000 == 0 &&
		p.Allowed(pool, c.Pod.Namespace) {
		return pool
	}
	return p.cfg.DefaultPool
}

// Allowed tells whether a namespace may ask for a pool.
func (p *Policy) Allowed(pool, namespace string) bool {
	allowed, restricted := p.cfg.AllowedNamespaces[pool]
	if !restricted {
		return true
	}
	return slices.Contains(allowed, namespace) || slices.Contains(allowed, "*")
}

// checkAnnotationKeys refuses keys in our domain that we do not know, so a
// typo such as "pool.cpupool.dev/containr.x" is an error, not ignored.
func checkAnnotationKeys(ann map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		base, scope, _ := strings.Cut(k, "/")
		if !strings.HasSuffix(base, "."+AnnotationDomain) && base != AnnotationDomain {
			continue
		}
		if !slices.Contains(knownAnnotations, base) {
			return &AnnotationError{k, ann[k], "unknown annotation; known keys are " + strings.Join(knownAnnotations, ", ")}
		}
		if scope != "" && scope != "pod" && !strings.HasPrefix(scope, "container.") {
			return &AnnotationError{k, ann[k], "unknown scope " + strconv.Quote(scope) + "; use <key>, <key>/pod or <key>/container.<name>"}
		}
	}
	return nil
}
