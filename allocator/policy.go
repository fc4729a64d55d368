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
)

var knownAnnotations = []string{AnnotationPool, AnnotationNUMA, AnnotationDevice, AnnotationHideHyperthreads, AnnotationFullPCPUsOnly, AnnotationDistributeAcrossNUMA}

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

	if key, v, ok := lookup(c.Annotations, AnnotationPool, c.Name); ok {
		pool := strings.TrimSpace(v)
		if !slices.Contains(pools.Names(), pool) {
			return Request{}, &AnnotationError{key, v, "unknown pool; use one of " + strings.Join(pools.Names(), ", ")}
		}
		if !p.Allowed(pool, c.Pod.Namespace) {
			return Request{}, &AnnotationError{key, v, fmt.Sprintf("namespace %q may not use pool %s (allowedNamespaces.%s: %v)", c.Pod.Namespace, pool, pool, p.cfg.AllowedNamespaces[pool])}
		}
		if pools.IsExclusive(pool) && c.MilliCPU <= 0 {
			return Request{}, &AnnotationError{key, v, "the exclusive size is the container's CPU request, and it requests no CPU; set resources.requests.cpu"}
		}
		req.Pool = pool
	} else {
		req.Pool = p.defaultPool(c)
	}

	for _, b := range []struct {
		key string
		dst *bool
	}{
		{AnnotationHideHyperthreads, &req.Options.HideHyperthreads},
		{AnnotationFullPCPUsOnly, &req.Options.FullPCPUsOnly},
		{AnnotationDistributeAcrossNUMA, &req.Options.DistributeAcrossNUMA},
	} {
		if key, v, ok := lookup(c.Annotations, b.key, c.Name); ok {
			val, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return Request{}, &AnnotationError{key, v, "not a boolean; use true or false"}
			}
			*b.dst = val
		}
	}
	if key, v, ok := lookup(c.Annotations, AnnotationNUMA, c.Name); ok {
		nodes, err := config.ParseCPUList(v)
		if err != nil || nodes.IsEmpty() {
			return Request{}, &AnnotationError{key, v, "not a NUMA node list; write e.g. \"0\" or \"0,1\""}
		}
		req.NUMANodes = nodes
	}
	if key, v, ok := lookup(c.Annotations, AnnotationDevice, c.Name); ok {
		var nodes []int
		for _, path := range strings.Split(v, ",") {
			path = strings.TrimSpace(path)
			if resolve == nil {
				return Request{}, &AnnotationError{key, v, "device locality cannot be resolved here"}
			}
			node, err := resolve(path)
			if err != nil {
				return Request{}, &AnnotationError{key, v, err.Error()}
			}
			if node >= 0 {
				nodes = append(nodes, node)
			}
		}
		req.PreferNUMA = req.PreferNUMA.Union(cpuset.New(nodes...))
	}
	if !pools.IsExclusive(req.Pool) && !req.NUMANodes.IsEmpty() {
		key, v, _ := lookup(c.Annotations, AnnotationNUMA, c.Name)
		return Request{}, &AnnotationError{key, v, fmt.Sprintf("applies to exclusive pools only, and the container goes to %s", req.Pool)}
	}
	return req, nil
}

// defaultPool applies the kubelet static policy's rule when enabled:
// whole-CPU requests of Guaranteed pods are exclusive.
func (p *Policy) defaultPool(c Container) string {
	if p.cfg.GuaranteedExclusive && c.QoS == QoSGuaranteed && c.MilliCPU > 0 && c.MilliCPU%1000 == 0 &&
		p.Allowed(pools.Exclusive, c.Pod.Namespace) {
		return pools.Exclusive
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
