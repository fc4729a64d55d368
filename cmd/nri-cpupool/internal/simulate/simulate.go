// Package simulate replays a requests file through the same policy and
// allocator the plugin uses, for capacity planning and tests.
package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// File is a requests file (docs/commands.md "simulate requests file").
type File struct {
	Steps []Step `yaml:"steps"`
}

// Step is one create, one remove or one resize.
type Step struct {
	Create *Create `yaml:"create"`
	Remove *Remove `yaml:"remove"`
	Resize *Resize `yaml:"resize"`
}

// Resize changes a running container's CPU request in place, as a
// Kubernetes in-place pod resize does.
type Resize struct {
	Pod       string `yaml:"pod"`
	Namespace string `yaml:"namespace"`
	Container string `yaml:"container"`
	CPUs      string `yaml:"cpus"` // the new CPU request, Kubernetes quantity
	// Memory is the new memory limit, a Kubernetes quantity ("2Gi"):
	// counted in place of the old one as an UpdateContainer's memory.limit
	// is (allocator.ResizeMemory).
	Memory string `yaml:"memory"`
}

// Create adds a container.
type Create struct {
	Pod         string            `yaml:"pod"`
	Namespace   string            `yaml:"namespace"`
	Container   string            `yaml:"container"`
	CPUs        string            `yaml:"cpus"`  // CPU request, Kubernetes quantity
	Limit       string            `yaml:"limit"` // CPU limit, Kubernetes quantity
	QoS         string            `yaml:"qos"`   // guaranteed, burstable, besteffort; derived when empty
	Annotations map[string]string `yaml:"annotations"`
	// Devices are sysfs device paths the container uses (as NRI reports
	// its Linux devices); their NUMA nodes are preferred.
	Devices []string `yaml:"devices"`
	// Memory is the memory limit, a Kubernetes quantity ("1Gi"); counted
	// per NUMA node for exclusive containers whose mems are pinned
	// (memory.go).
	Memory string `yaml:"memory"`
	// HugePages are the hugepage limits, by the keys hugepages-<size> as
	// Kubernetes names the resources ("hugepages-2Mi": "64Mi"). The map
	// takes every key that is not a field; Parse rejects any other.
	HugePages map[string]string `yaml:",inline"`
}

// Remove deletes a container (or, without container, every container of
// the pod).
type Remove struct {
	Pod       string `yaml:"pod"`
	Namespace string `yaml:"namespace"`
	Container string `yaml:"container"`
}

// Load reads a requests file strictly (see Parse).
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading requests: %w", err)
	}
	return Parse(data, path)
}

// formatHint ends an error about the file's form: what a requests file
// is, and where it is documented.
const formatHint = "(a requests file is steps: with a list of create, remove or resize steps; see docs/commands.md, \"simulate requests file\")"

// Parse reads a requests file's content strictly; name is used in errors.
// What the decoder refuses is said as validate says it of the config
// (config.ExplainDecodeError): the line, the YAML path, the nearest known
// key or the kind of value the key takes.
func Parse(data []byte, path string) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) { // nothing but blanks and comments
			return nil, fmt.Errorf("requests %s: no steps, the file is empty %s", path, formatHint)
		}
		return nil, fmt.Errorf("requests %s: %s %s", path, config.ExplainDecodeError(data, reflect.TypeFor[File](), err), formatHint)
	}
	// simulate runs the steps of one document: validate refuses a second
	// one in the config alike.
	if err := config.OnlyDocument(dec, "simulate", "step"); err != nil {
		if !errors.Is(err, config.ErrSecondDocument) {
			err = fmt.Errorf("after the first YAML document: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil, fmt.Errorf("requests %s: %w", path, err)
	}
	if len(f.Steps) == 0 {
		// Steps all commented out run nothing, and a run of nothing
		// looks like a run that went well.
		return nil, fmt.Errorf("requests %s: no steps, the file lists none (are they commented out?) %s", path, formatHint)
	}
	for i, s := range f.Steps {
		given := 0
		for _, p := range []bool{s.Create != nil, s.Remove != nil, s.Resize != nil} {
			if p {
				given++
			}
		}
		if given != 1 {
			return nil, fmt.Errorf("requests %s: step %d: give exactly one of create, remove or resize", path, i+1)
		}
		if s.Resize != nil && (s.Resize.Pod == "" || s.Resize.Container == "" || strings.TrimSpace(s.Resize.CPUs) == "" && strings.TrimSpace(s.Resize.Memory) == "") {
			return nil, fmt.Errorf("requests %s: step %d: resize needs pod, container and cpus or memory", path, i+1)
		}
		if s.Create != nil && (s.Create.Pod == "" || s.Create.Container == "") {
			return nil, fmt.Errorf("requests %s: step %d: create needs pod and container", path, i+1)
		}
		if s.Create != nil {
			if err := checkLimitKeys(s.Create); err != nil {
				return nil, fmt.Errorf("requests %s: step %d: create %s/%s/%s: %w", path, i+1, namespaceOf(s.Create.Namespace), s.Create.Pod, s.Create.Container, err)
			}
		}
		if s.Remove != nil && s.Remove.Pod == "" {
			return nil, fmt.Errorf("requests %s: step %d: remove needs pod", path, i+1)
		}
	}
	return &f, nil
}

// Result is one step's outcome; the JSON fields are a documented interface.
type Result struct {
	Step      int    `json:"step"`
	Action    string `json:"action"`
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Container string `json:"container"`
	Pool      string `json:"pool"`
	CPUs      string `json:"cpus"`
	// SharedCPUs is the shared pool's part of the cpuset of an exclusive
	// container that asked for it (shared-cpus.cpupool.dev); CPUs is its
	// exclusive part.
	SharedCPUs string `json:"sharedCPUs,omitempty"`
	Mems       string `json:"mems"`
	Error      string `json:"error"`
	// Warning is what the plugin would log of a placement it made anyway
	// (a memory limit no set of nodes holds), and what it would tell the
	// pod of a container allowedNamespaces kept out of the pool
	// guaranteedExclusive would have given it (CPUPoolNotAllowed).
	Warning string           `json:"warning,omitempty"`
	Updates []Update         `json:"updates,omitempty"`
	Pools   map[string]Usage `json:"pools"`
	// Memory is what the step's container holds of each NUMA node's
	// memory (an exclusive container whose mems are pinned, asking for
	// memory or hugepages).
	Memory []HeldMemory `json:"memory,omitempty"`
	// NUMAMemory is each NUMA node's memory after the step, as status
	// shows it; given when a step of the file asks for memory.
	NUMAMemory []state.NUMAMemory `json:"numaMemory,omitempty"`
}

// joinWarnings is a step's warnings, those that are not "", in one line.
func joinWarnings(warnings ...string) string {
	return strings.Join(slices.DeleteFunc(warnings, func(w string) bool { return w == "" }), "; ")
}

// Update is another container moved by the step.
type Update struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
	CPUs      string `json:"cpus"`
}

// Usage is a pool's size after a step.
type Usage struct {
	CPUs string `json:"cpus"`
	Size int    `json:"size"`
	// Free is the unassigned part of an exclusive pool.
	Free     string `json:"free,omitempty"`
	FreeSize *int   `json:"freeSize,omitempty"`
}

// Runner replays steps.
type Runner struct {
	alloc  *allocator.Allocator
	policy *allocator.Policy
	// resolveDevice finds a device's NUMA node in the simulated node's sysfs.
	resolveDevice func(devicePath string) (int, error)
	// created are the running containers as the policy saw them, for
	// resizes.
	created map[string]allocator.Container
}

// NewRunner builds the allocator for a node and configuration.
func NewRunner(topo *sysfs.Topology, cfg *config.Config, sysfsRoot string) (*Runner, error) {
	layout, problems := allocator.BuildLayout(topo, cfg)
	if problems.HasErrors() {
		return nil, &MisfitError{Problems: problems.Errors()}
	}
	return &Runner{alloc: allocator.New(topo, layout, cfg.PinMemory), policy: allocator.NewPolicy(cfg, topo), resolveDevice: sysfs.DeviceNUMAResolver(sysfsRoot),
		created: map[string]allocator.Container{}}, nil
}

// MisfitError is a configuration that does not fit the node: its errors,
// by key, which a caller may name as its flags (--isolated-cpus).
type MisfitError struct {
	Problems config.Problems
}

func (e *MisfitError) Error() string {
	return fmt.Sprintf("the configuration does not fit this node:\n%s", e.Problems)
}

// Allocator exposes the allocator for inspection.
func (r *Runner) Allocator() *allocator.Allocator { return r.alloc }

// Run replays every step; a failing step is reported and the run goes on.
func (r *Runner) Run(f *File) []Result {
	var out []Result
	memory := asksMemory(f)
	for i, s := range f.Steps {
		var res Result
		switch {
		case s.Create != nil:
			res = r.create(s.Create)
		case s.Resize != nil:
			res = r.resize(s.Resize)
		default:
			res = r.remove(s.Remove)
		}
		res.Step = i + 1
		res.Pools = r.usage()
		if memory {
			res.NUMAMemory = numamem.NUMAMemoryStatus(r.alloc.MemoryReport())
		}
		out = append(out, res)
	}
	return out
}

func containerID(ns, pod, container string) string { return ns + "/" + pod + "/" + container }

// DefaultNamespace is a request's namespace when it names none, as in
// Kubernetes.
const DefaultNamespace = "default"

func namespaceOf(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// AllContainers stands for "every container of the pod" where a remove
// names no container.
const AllContainers = "*"

// ContainerOrAll names a step's container for people: AllContainers for a
// remove of the whole pod.
func ContainerOrAll(container string) string {
	if container == "" {
		return AllContainers
	}
	return container
}

func (r *Runner) create(c *Create) Result {
	ns := namespaceOf(c.Namespace)
	res := Result{Action: "create", Pod: c.Pod, Namespace: ns, Container: c.Container}
	fail := func(err error) Result { res.Error = err.Error(); return res }
	request, err := milli("cpus", c.CPUs)
	if err != nil {
		return fail(err)
	}
	limit, err := milli("limit", c.Limit)
	if err != nil {
		return fail(err)
	}
	if request == 0 && limit > 0 {
		request = limit // Kubernetes defaults the request to the limit.
	}
	if limit > 0 && request > limit {
		return fail(fmt.Errorf("cpus %s is larger than limit %s", cpulist.EchoLong(c.CPUs), cpulist.EchoLong(c.Limit)))
	}
	qos := c.QoS
	switch {
	case qos == "" && request > 0 && request == limit:
		qos = allocator.QoSGuaranteed
	case qos == "" && (request > 0 || limit > 0):
		qos = allocator.QoSBurstable
	case qos == "":
		qos = allocator.QoSBestEffort
	case qos != allocator.QoSGuaranteed && qos != allocator.QoSBurstable && qos != allocator.QoSBestEffort:
		return fail(fmt.Errorf("qos %s: use guaranteed, burstable or besteffort", cpulist.EchoLong(qos)))
	}
	var devNUMA []int
	for _, d := range c.Devices {
		node, err := r.resolveDevice(d)
		if err != nil {
			return fail(err)
		}
		if node >= 0 {
			devNUMA = append(devNUMA, node)
		}
	}
	demand, err := demandOf(c)
	if err != nil {
		return fail(err)
	}
	ctr := allocator.Container{
		ID: containerID(ns, c.Pod, c.Container), Name: c.Container, Annotations: c.Annotations, QoS: qos, MilliCPU: request,
		Pod:        allocator.PodRef{Namespace: ns, Name: c.Pod, UID: ns + "/" + c.Pod},
		DeviceNUMA: cpuset.New(devNUMA...),
		Demand:     demand,
	}
	req, err := r.policy.Request(ctr, r.resolveDevice)
	if err != nil {
		return fail(err)
	}
	res.Pool = req.Pool
	out, err := r.alloc.Allocate(req)
	if err != nil {
		return fail(err)
	}
	res.CPUs, res.SharedCPUs, res.Mems = out.Assignment.CPUs.String(), sharedOf(out.Assignment), out.Assignment.Mems.String()
	res.Memory, res.Warning = heldMemory(out.Assignment.Memory), joinWarnings(req.NotAllowedMessage(), out.Warning)
	res.Updates = updates(out.Updates)
	r.created[ctr.ID] = ctr
	return res
}

func (r *Runner) resize(rs *Resize) Result {
	ns := rs.Namespace
	if ns == "" {
		ns = "default"
	}
	res := Result{Action: "resize", Pod: rs.Pod, Namespace: ns, Container: rs.Container}
	ctr, ok := r.created[containerID(ns, rs.Pod, rs.Container)]
	if _, running := r.alloc.Get(ctr.ID); !ok || !running {
		res.Error = r.missing(ns, rs.Pod, rs.Container)
		return res
	}
	// Both are read before anything changes: a step that fails changes
	// nothing, as a refused UpdateContainer.
	request, err := milli("cpus", rs.CPUs)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	var limit int64
	if strings.TrimSpace(rs.Memory) != "" {
		if limit, err = bytesOf("memory", strings.TrimSpace(rs.Memory)); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	out := allocator.Result{}
	out.Assignment, _ = r.alloc.Get(ctr.ID)
	if strings.TrimSpace(rs.CPUs) != "" {
		// A running container keeps its pool, and its annotations are
		// judged against it, as the daemon's resize does (plugin/resize.go);
		// simulate confines no container, so the running pool is the one.
		ctr.MilliCPU, ctr.Pool = request, out.Assignment.Pool
		req, err := r.policy.Request(ctr, r.resolveDevice)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		if out, err = r.alloc.Resize(req); err != nil {
			res.Error = err.Error()
			return res
		}
		r.created[ctr.ID] = ctr
	}
	if strings.TrimSpace(rs.Memory) != "" {
		mem, _, err := r.alloc.ResizeMemory(ctr.ID, limit)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		out.Assignment, out.Warning = mem.Assignment, mem.Warning
		ctr.Demand.Memory = limit
		r.created[ctr.ID] = ctr
	}
	res.Pool, res.CPUs, res.SharedCPUs, res.Mems = out.Assignment.Pool, out.Assignment.CPUs.String(), sharedOf(out.Assignment), out.Assignment.Mems.String()
	res.Memory, res.Warning = heldMemory(out.Assignment.Memory), out.Warning
	res.Updates = updates(out.Updates)
	return res
}

// sharedOf is the shared part of an assignment, "" without one.
func sharedOf(a allocator.Assignment) string {
	if !a.WithShared {
		return ""
	}
	return a.Shared.String()
}

func (r *Runner) remove(rm *Remove) Result {
	ns := namespaceOf(rm.Namespace)
	res := Result{Action: "remove", Pod: rm.Pod, Namespace: ns, Container: rm.Container}
	var ids []string
	for _, a := range r.alloc.Assignments() {
		if a.Pod.Namespace == ns && a.Pod.Name == rm.Pod && (rm.Container == "" || a.Container == rm.Container) {
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		res.Error = r.missing(ns, rm.Pod, rm.Container)
		return res
	}
	for _, id := range ids {
		delete(r.created, id)
		out := r.alloc.Release(id)
		res.Pool, res.CPUs, res.Mems = out.Assignment.Pool, out.Assignment.CPUs.String(), out.Assignment.Mems.String()
		res.Updates = append(res.Updates, updates(out.Updates)...)
	}
	return res
}

// missing says what a step names that does not run: the pod, when none
// of its containers runs (not `no container * in pod default/zz`), else
// the container.
func (r *Runner) missing(ns, pod, container string) string {
	for _, a := range r.alloc.Assignments() {
		if a.Pod.Namespace == ns && a.Pod.Name == pod {
			return fmt.Sprintf("no container %s in pod %s/%s", container, ns, pod)
		}
	}
	return fmt.Sprintf("no pod %s/%s: no container of it runs", ns, pod)
}

func updates(as []allocator.Assignment) []Update {
	var out []Update
	for _, a := range as {
		out = append(out, Update{Pod: a.Pod.Namespace + "/" + a.Pod.Name, Container: a.Container, CPUs: a.CPUs.String()})
	}
	return out
}

func (r *Runner) usage() map[string]Usage {
	out := map[string]Usage{}
	for _, p := range pools.Names() {
		cpus := r.alloc.PoolCPUs(p)
		u := Usage{CPUs: cpus.String(), Size: cpus.Size()}
		if pools.IsExclusive(p) {
			free := r.alloc.AvailableCPUs(p)
			size := free.Size()
			u.Free, u.FreeSize = free.String(), &size
		}
		out[p] = u
	}
	return out
}

// milli parses a Kubernetes CPU quantity ("500m", "2", "1.5") in milli-CPUs.
func milli(key, s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a CPU quantity (write e.g. \"2\", \"500m\" or \"1.5\")", key, cpulist.EchoLong(s))
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("%s %s is negative", key, cpulist.EchoLong(s))
	}
	// MilliValue wraps around beyond int64: bound the quantity first.
	if q.Cmp(*resource.NewQuantity(cpulist.MaxCPUs, resource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("%s %s is larger than any node (at most %d CPUs)", key, cpulist.EchoLong(s), cpulist.MaxCPUs)
	}
	return q.MilliValue(), nil
}
