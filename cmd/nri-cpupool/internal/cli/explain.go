package cli

// explain answers "why did my container get these CPUs (or none)" from
// the state file and the node, without the daemon: the pool and the rule
// that chose it, where its CPUs lie (cores, L3 groups, NUMA nodes), its
// memory, the isolation in force on its CPUs, and for a refused container
// its last refusal. It only reads.

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

const explainSynopsis = "explain NAMESPACE/POD[/CONTAINER] [--state-file F] [--config F] [--sysfs-root D] [--proc-root D] [--cgroup-root D] [--json]"

func runExplain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("explain", explainSynopsis, stderr)
	cfgPath := configFlag(fs, "the node's configuration file, as run reads it (a missing default file means built-in defaults); its stateFile, sysfsRoot, procRoot, cgroupRoot and pools' housekeeping apply")
	stateFile := fs.String("state-file", "", "the plugin's state file (default: the config's stateFile)")
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	procRoot := fs.String("proc-root", "", "where procfs is mounted, for the IRQs (default: the config's procRoot, /proc)")
	cgroupRoot := fs.String("cgroup-root", "", "the cgroup mount, for isolated partitions (default: the config's cgroupRoot)")
	asJSON := fs.Bool("json", false, "print JSON (fields in docs/commands.md)")
	target, err := parseTarget(fs, args, stdout)
	if err != nil {
		return err
	}
	cfg, err := readNodeConfig(*cfgPath, stderr)
	if err != nil {
		return err
	}
	configStateFile := cfg.StateFile
	for _, o := range []struct{ flag, dst *string }{{stateFile, &cfg.StateFile}, {procRoot, &cfg.ProcRoot}, {cgroupRoot, &cfg.CgroupRoot}} {
		if *o.flag != "" {
			*o.dst = *o.flag
		}
	}
	st, err := readState(cfg.StateFile)
	if err != nil {
		return err
	}
	found, err := findExplained(st, target)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.StateFile, err)
	}
	// The node is read only for containers that have CPUs; a refused
	// container is explained without it.
	var node *explainNode
	for _, e := range found {
		if e.record != nil {
			if node, err = readExplainNode(sysfsRoot(*root, cfg), cfg); err != nil {
				return err
			}
			break
		}
	}
	fresh := freshnessOf(st.Written, cfg.StateFile, configStateFile, cfg.MetricsAddress)
	live := livenessOf(cfg.StateFile)
	out := explainOutput{Target: target.String(), Written: fresh.Written, StateWriterFailing: fresh.WriterFailing, DaemonRunning: live.JSON()}
	inPod := podContainers(st, target.Namespace, target.Pod)
	for _, e := range found {
		x, err := explainOne(e, cfg, node, inPod)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.StateFile, err)
		}
		out.Containers = append(out.Containers, x)
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	for i, x := range out.Containers {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		writeExplained(stdout, x)
	}
	fmt.Fprintln(stdout)
	writeFreshness(stdout, cfg.StateFile, fresh)
	writeDaemonNotRunning(stdout, cfg.StateFile, live)
	return nil
}

// explainTarget is what explain was asked about; Container is "" for a
// whole pod.
type explainTarget struct{ Namespace, Pod, Container string }

func (t explainTarget) String() string {
	s := t.Namespace + "/" + t.Pod
	if t.Container != "" {
		s += "/" + t.Container
	}
	return s
}

// maxTargetName bounds each part of the target: a Kubernetes name is at
// most 253 bytes.
const maxTargetName = 253

// parseTarget parses the flags, before and after the one argument, and
// the argument: NAMESPACE/POD or NAMESPACE/POD/CONTAINER.
func parseTarget(fs *flag.FlagSet, args []string, stdout io.Writer) (explainTarget, error) {
	var rest []string
	// The flag package stops at the first argument: parse what follows
	// it again, so that `explain ns/pod --json` works as `--json ns/pod`.
	for {
		if err := parseFlags(fs, args, stdout); err != nil {
			return explainTarget{}, err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(rest) {
	case 0:
		return explainTarget{}, usageError(fs, "explain needs NAMESPACE/POD or NAMESPACE/POD/CONTAINER")
	case 1:
	default:
		return explainTarget{}, usageError(fs, fmt.Sprintf("explain takes one NAMESPACE/POD[/CONTAINER], got %d: %s", len(rest), cpulist.Echo(strings.Join(rest, " "))))
	}
	parts := strings.Split(rest[0], "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return explainTarget{}, usageError(fs, fmt.Sprintf("%s is not NAMESPACE/POD or NAMESPACE/POD/CONTAINER (e.g. telco/dpdk or telco/dpdk/fwd)", cpulist.Echo(rest[0])))
	}
	for _, p := range parts {
		if len(p) > maxTargetName {
			return explainTarget{}, usageError(fs, fmt.Sprintf("%s: a name is at most %d bytes", cpulist.Echo(p), maxTargetName))
		}
	}
	t := explainTarget{Namespace: parts[0], Pod: parts[1]}
	if len(parts) == 3 {
		t.Container = parts[2]
	}
	return t, nil
}

// explained is one container the state knows of: running (record and id),
// stopped with CPUs held for its pod (record, held), or refused (refusal).
type explained struct {
	id      string
	record  *state.ContainerState
	held    *state.HeldState
	refusal *state.Refusal
}

func (e explained) name() (namespace, pod, container string) {
	switch {
	case e.record != nil:
		return e.record.PodNamespace, e.record.PodName, e.record.Container
	default:
		return e.refusal.PodNamespace, e.refusal.PodName, e.refusal.Container
	}
}

// findExplained finds what the state knows of the target, sorted by
// container name (running before held); an error with a suggestion when
// it knows nothing.
func findExplained(st *state.State, t explainTarget) ([]explained, error) {
	var all []explained
	for _, id := range slices.Sorted(maps.Keys(st.Containers)) {
		c := st.Containers[id]
		all = append(all, explained{id: id, record: &c})
	}
	for _, k := range slices.Sorted(maps.Keys(st.Held)) {
		h := st.Held[k]
		all = append(all, explained{id: h.ContainerID, record: &h.ContainerState, held: &h})
	}
	for i := range st.Refusals {
		r := st.Refusals[i]
		all = append(all, explained{refusal: &r})
	}
	var inPod, found []explained
	for _, e := range all {
		ns, pod, ctr := e.name()
		if ns != t.Namespace || pod != t.Pod {
			continue
		}
		inPod = append(inPod, e)
		if t.Container == "" || ctr == t.Container {
			found = append(found, e)
		}
	}
	// A container both refused and placed (an older refusal the plugin
	// kept) is explained by its placement.
	found = slices.DeleteFunc(found, func(e explained) bool {
		if e.refusal == nil {
			return false
		}
		return slices.ContainsFunc(found, func(o explained) bool {
			return o.record != nil && o.held == nil && o.record.Container == e.refusal.Container
		})
	})
	slices.SortStableFunc(found, func(a, b explained) int {
		_, _, ca := a.name()
		_, _, cb := b.name()
		return strings.Compare(ca, cb)
	})
	if len(found) > 0 {
		return found, nil
	}
	if len(inPod) > 0 {
		var names []string
		for _, e := range inPod {
			_, _, c := e.name()
			if !slices.Contains(names, c) {
				names = append(names, c)
			}
		}
		slices.Sort(names)
		msg := fmt.Sprintf("pod %s/%s has no container %s in the state (it has %s)", t.Namespace, t.Pod, t.Container, strings.Join(names, ", "))
		if near := nearestName(t.Container, names); near != "" {
			msg += fmt.Sprintf("; did you mean %s/%s/%s?", t.Namespace, t.Pod, near)
		}
		return nil, fmt.Errorf("%s", msg)
	}
	var pods []string
	for _, e := range all {
		ns, pod, _ := e.name()
		if p := ns + "/" + pod; !slices.Contains(pods, p) {
			pods = append(pods, p)
		}
	}
	msg := fmt.Sprintf("no pod %s/%s in the state: the plugin has placed, held or refused no container of it", t.Namespace, t.Pod)
	if near := nearestName(t.Namespace+"/"+t.Pod, pods); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", near)
	} else if len(pods) > 0 {
		msg += " (`nri-cpupool status` lists the containers it knows)"
	}
	return nil, fmt.Errorf("%s", msg)
}

// nearestName is the name within a few edits of name ("" when none is):
// the edit distance, as the config's unknown keys use it.
func nearestName(name string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		if len(n) > 2*maxTargetName+1 {
			continue // bounded: the distance takes len(a)*len(b)
		}
		d := config.EditDistance(name, n)
		if d > max(2, len(n)/3) {
			continue
		}
		if bestD < 0 || d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	return best
}

// explainNode is what explain reads of the node: its topology and what
// the kernel says of isolation now.
type explainNode struct {
	topo *sysfs.Topology
	// nohzFull and partition are the kernel's nohz_full CPUs and its
	// isolated partitions' (cgroup v2); partitionKnown is false where it
	// does not say.
	nohzFull       cpuset.CPUSet
	partition      cpuset.CPUSet
	partitionKnown bool
	// irqs are the device IRQs by number with the CPUs each may run on.
	irqs map[int]cpuset.CPUSet
	// irqsKnown is false when /proc/irq cannot be read.
	irqsKnown bool
}

func readExplainNode(root string, cfg *config.Config) (*explainNode, error) {
	topo, err := sysfs.Discover(root)
	if err != nil {
		return nil, err
	}
	n := &explainNode{topo: topo, nohzFull: cpuset.New(), partition: cpuset.New()}
	read := func(path string) (cpuset.CPUSet, bool) {
		data, err := os.ReadFile(path)
		if err != nil {
			return cpuset.New(), false
		}
		set, err := cpulist.Parse(strings.TrimSpace(string(data)))
		return set, err == nil // nohz_full reads "(null)" on kernels without it
	}
	n.nohzFull, _ = read(filepath.Join(root, "sys/devices/system/cpu/nohz_full"))
	if v2 := cgroupV2Root(cfg.CgroupRoot); v2 != "" {
		n.partition, n.partitionKnown = read(filepath.Join(v2, "cpuset.cpus.isolated"))
	}
	dirs, err := os.ReadDir(filepath.Join(cfg.ProcRoot, "irq"))
	if err != nil {
		return n, nil // said as unknown
	}
	n.irqs, n.irqsKnown = map[int]cpuset.CPUSet{}, true
	for _, d := range dirs {
		num, err := strconv.Atoi(d.Name())
		if err != nil || !d.IsDir() {
			continue
		}
		if set, ok := read(filepath.Join(cfg.ProcRoot, "irq", d.Name(), "smp_affinity_list")); ok {
			n.irqs[num] = set
		}
	}
	return n, nil
}

// explainOutput is explain's JSON: a contract, documented in
// docs/commands.md.
type explainOutput struct {
	Target     string               `json:"target"`
	Containers []explainedContainer `json:"containers"`
	// Written is when the state file was written; StateWriterFailing,
	// what the daemon says of its failing state writer (statefreshness.go).
	Written            time.Time `json:"written"`
	StateWriterFailing string    `json:"stateWriterFailing,omitempty"`
	// DaemonRunning is whether a daemon holds the state directory's lock
	// (daemonrunning.go); absent when the lock cannot tell. The containers'
	// state is the file's memory: with no daemon, what it last saw.
	DaemonRunning *bool `json:"daemonRunning,omitempty"`
}

type explainedContainer struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// State is running, held (stopped, its CPUs held for its pod) or
	// refused.
	State       string            `json:"state"`
	ContainerID string            `json:"containerID,omitempty"`
	ExitCode    *int32            `json:"exitCode,omitempty"`
	Pool        string            `json:"pool,omitempty"`
	MilliCPU    int64             `json:"milliCPU,omitempty"`
	Rule        *explainedRule    `json:"rule,omitempty"`
	CPUs        string            `json:"cpus,omitempty"`
	Reserved    string            `json:"reserved,omitempty"`
	SharedCPUs  string            `json:"sharedCPUs,omitempty"`
	Cores       []string          `json:"cores,omitempty"`
	L3Groups    []explainedGroup  `json:"l3Groups,omitempty"`
	NUMANodes   string            `json:"numaNodes,omitempty"`
	Mems        string            `json:"mems,omitempty"`
	Memory      []explainedMemory `json:"memory,omitempty"`
	Isolation   *explainedIsol    `json:"isolation,omitempty"`
	Refusal     *state.Refusal    `json:"refusal,omitempty"`
}

type explainedRule struct {
	// Kind is annotation, qos, default, dra-claim, device-plugin, or
	// unrecorded (placed by a release before state schema 6).
	Kind       string `json:"kind"`
	Detail     string `json:"detail,omitempty"`
	DeviceNUMA string `json:"deviceNUMA,omitempty"`
	FromHold   string `json:"fromHold,omitempty"`
	// Unmatched are the pod's container-scoped annotation keys that name
	// a container the state knows no container of the pod by, when the
	// container has no key of its own: most likely a typo of its name,
	// which left it to the other rules.
	Unmatched []string `json:"unmatched,omitempty"`
}

type explainedGroup struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus"`
}

type explainedMemory struct {
	Node      int              `json:"node"`
	Memory    int64            `json:"memory,omitempty"`
	HugePages map[string]int64 `json:"hugePages,omitempty"`
}

type explainedIsol struct {
	IRQIsolation bool `json:"irqIsolation"`
	// DeviceIRQs are the device IRQs allowed on its CPUs now; nil when
	// /proc/irq could not be read.
	DeviceIRQs        []int  `json:"deviceIRQs"`
	Housekeeping      string `json:"housekeeping"`
	IsolatedPartition bool   `json:"isolatedPartition"`
	// PartitionInForce: whether the kernel counts its CPUs as isolated by
	// a partition; absent where it does not say.
	PartitionInForce *bool `json:"partitionInForce,omitempty"`
	// PowerClass, DomainIsolated and NohzFull are always present, "" when
	// none (docs/commands.md): scripts index them.
	PowerClass     string `json:"powerClass"`
	DomainIsolated string `json:"domainIsolated"`
	NohzFull       string `json:"nohzFull"`
	Offline        string `json:"offline,omitempty"`
}

// ruleUnrecorded is the rule of a record written before state schema 6.
const ruleUnrecorded = "unrecorded"

func explainOne(e explained, cfg *config.Config, node *explainNode, inPod map[string]bool) (explainedContainer, error) {
	ns, pod, ctr := e.name()
	x := explainedContainer{Namespace: ns, Pod: pod, Container: ctr}
	if e.record == nil {
		x.State, x.Refusal = "refused", e.refusal
		return x, nil
	}
	c := e.record
	x.State, x.ContainerID = "running", e.id
	if e.held != nil {
		x.State, x.ExitCode = "held", e.held.ExitCode
	}
	x.Pool, x.MilliCPU, x.CPUs, x.Reserved, x.Mems = c.Pool, c.MilliCPU, c.CPUs, c.Reserved, c.Mems
	if c.WithShared {
		x.SharedCPUs = c.SharedCPUs
	}
	x.Rule = &explainedRule{Kind: cmp.Or(c.Rule, ruleUnrecorded), Detail: c.RuleDetail, DeviceNUMA: c.DeviceNUMA, FromHold: c.FromHold,
		Unmatched: unmatchedKeys(c.OtherContainerKeys, inPod)}
	cpus, err := cpulist.Parse(c.CPUs)
	if err != nil {
		return x, fmt.Errorf("container %s/%s/%s: cpus: %w", ns, pod, ctr, err)
	}
	reserved, err := cpulist.Parse(c.Reserved)
	if err != nil {
		return x, fmt.Errorf("container %s/%s/%s: reserved: %w", ns, pod, ctr, err)
	}
	held := cpus.Union(reserved)
	x.Cores, x.L3Groups, x.NUMANodes = placementOf(node.topo, held)
	if x.Memory, err = memoryOf(c.Memory); err != nil {
		return x, fmt.Errorf("container %s/%s/%s: memory: %w", ns, pod, ctr, err)
	}
	if pools.IsExclusive(c.Pool) {
		x.Isolation = isolationOf(c, held, cfg, node)
	}
	return x, nil
}

// podContainers are the names of the containers of a pod the state knows
// of: running, held or refused.
func podContainers(st *state.State, namespace, pod string) map[string]bool {
	names := map[string]bool{}
	add := func(ns, p, c string) {
		if ns == namespace && p == pod {
			names[c] = true
		}
	}
	for _, c := range st.Containers {
		add(c.PodNamespace, c.PodName, c.Container)
	}
	for _, h := range st.Held {
		add(h.PodNamespace, h.PodName, h.Container)
	}
	for _, r := range st.Refusals {
		add(r.PodNamespace, r.PodName, r.Container)
	}
	return names
}

// unmatchedKeys are those of a record's other containers' keys
// (state.ContainerState.OtherContainerKeys) that name no container of
// its pod the state knows of. A key naming a container still to come
// (created later, or once the pod's image is pulled) is listed until it
// comes: the text says what the state knows, and the plugin's warning at
// the pod's end is the final word.
func unmatchedKeys(recorded string, inPod map[string]bool) []string {
	var out []string
	for key := range strings.SplitSeq(recorded, ",") {
		if _, name, ok := allocator.ContainerScoped(key); ok && !inPod[name] {
			out = append(out, key)
		}
	}
	return out
}

// placementOf says where CPUs lie: each core's CPUs of them, each L3
// group they touch (with all its CPUs) and their NUMA nodes.
func placementOf(topo *sysfs.Topology, cpus cpuset.CPUSet) (cores []string, l3 []explainedGroup, numa string) {
	byCore := map[int][]int{}
	byL3 := map[int]bool{}
	for _, id := range cpus.List() {
		c, ok := topo.CPU(id)
		if !ok {
			continue
		}
		byCore[c.Core] = append(byCore[c.Core], id)
		if c.L3 != sysfs.Unknown {
			byL3[c.L3] = true
		}
	}
	for _, core := range slices.Sorted(maps.Keys(byCore)) {
		cores = append(cores, cpuset.New(byCore[core]...).String())
	}
	for _, g := range slices.Sorted(maps.Keys(byL3)) {
		l3 = append(l3, explainedGroup{ID: g, CPUs: topo.CPUsWhere(func(c sysfs.CPU) bool { return c.L3 == g }).String()})
	}
	return cores, l3, topo.NUMANodesOf(cpus).String()
}

// memoryOf shows a record's memory (state.ParseMemory) with its page
// sizes named the Kubernetes way.
func memoryOf(record string) ([]explainedMemory, error) {
	held, err := state.ParseMemory(record)
	if err != nil || held == nil {
		return nil, err
	}
	out := make([]explainedMemory, 0, len(held))
	for _, h := range held {
		m := explainedMemory{Node: h.Node, Memory: h.Memory}
		for _, p := range h.HugePages {
			if m.HugePages == nil {
				m.HugePages = map[string]int64{}
			}
			m.HugePages[pageSizeName(p.SizeKB)] = p.Count
		}
		out = append(out, m)
	}
	return out, nil
}

// pageSizeName names a page size the Kubernetes way: 2Mi, 1Gi.
func pageSizeName(kb int64) string {
	switch {
	case kb%(1<<20) == 0:
		return strconv.FormatInt(kb>>20, 10) + "Gi"
	case kb%(1<<10) == 0:
		return strconv.FormatInt(kb>>10, 10) + "Mi"
	}
	return strconv.FormatInt(kb, 10) + "Ki"
}

// isolationOf is what keeps others off an exclusive container's CPUs: what
// the plugin does for it (its record, its pool's housekeeping) and what
// the kernel does now.
func isolationOf(c *state.ContainerState, cpus cpuset.CPUSet, cfg *config.Config, node *explainNode) *explainedIsol {
	iso := &explainedIsol{IRQIsolation: c.IsolateIRQs, Housekeeping: cfg.Housekeeping(c.Pool), IsolatedPartition: c.IsolatedPartition, PowerClass: c.PowerClass}
	if node.irqsKnown {
		iso.DeviceIRQs = []int{}
		for _, n := range slices.Sorted(maps.Keys(node.irqs)) {
			if !node.irqs[n].Intersection(cpus).IsEmpty() {
				iso.DeviceIRQs = append(iso.DeviceIRQs, n)
			}
		}
	}
	if node.partitionKnown {
		in := !cpus.IsEmpty() && cpus.IsSubsetOf(node.partition)
		iso.PartitionInForce = &in
	}
	iso.DomainIsolated = cpus.Intersection(node.topo.DomainIsolated).String()
	iso.NohzFull = cpus.Intersection(node.nohzFull).String()
	iso.Offline = cpus.Intersection(node.topo.Offline).String()
	return iso
}

// writeExplained prints one container, a line per fact.
func writeExplained(w io.Writer, x explainedContainer) {
	name := x.Namespace + "/" + x.Pod + "/" + x.Container
	switch x.State {
	case "refused":
		r := x.Refusal
		fmt.Fprintf(w, "%s: refused (%s), last at %s", name, r.Reason, r.Time.UTC().Format(time.RFC3339))
		if r.Count > 1 {
			fmt.Fprintf(w, ", %s in a row", plural.Count(r.Count, "time"))
		}
		fmt.Fprintf(w, "\n  %s\n", r.Message)
		return
	case "held":
		fmt.Fprintf(w, "%s: stopped", name)
		if x.ExitCode != nil {
			fmt.Fprintf(w, " (exit %d)", *x.ExitCode)
		}
		fmt.Fprintf(w, "; its CPUs are held for its pod until the pod's sandbox stops (container %s)\n", allocator.ShortID(x.ContainerID))
	default:
		fmt.Fprintf(w, "%s: running, container %s\n", name, allocator.ShortID(x.ContainerID))
	}
	line := func(k, format string, a ...any) { fmt.Fprintf(w, "  %-12s %s\n", k+":", fmt.Sprintf(format, a...)) }
	line("Pool", "%s (requests %dm)", x.Pool, x.MilliCPU)
	line("Decided by", "%s", ruleText(x.Rule))
	for _, key := range x.Rule.Unmatched {
		_, name, _ := allocator.ContainerScoped(key)
		line("Unmatched", "annotation %s names container %s, which the pod does not have now (in the state); if it is meant for %s, correct the name (a container of that name that ended, or is still to come, is not in the state either)",
			key, cpulist.Echo(name), x.Container)
	}
	if x.Rule.DeviceNUMA != "" {
		line("Near", "its devices' NUMA nodes %s (device locality)", x.Rule.DeviceNUMA)
	}
	if x.Rule.FromHold != "" {
		if x.Rule.FromHold == x.Container {
			line("From hold", "the CPUs held for its previous run")
		} else {
			line("From hold", "the CPUs held for %s, a stopped container of its pod", x.Rule.FromHold)
		}
	}
	cpus := x.CPUs
	if x.SharedCPUs != "" {
		cpus += " (+ the shared pool's " + x.SharedCPUs + ")"
	}
	line("CPUs", "%s", orDash(cpus))
	if x.Reserved != "" {
		line("Reserved", "%s (its cores' other threads, kept idle for it)", x.Reserved)
	}
	line("Cores", "%d: %s", len(x.Cores), strings.Join(x.Cores, " "))
	var groups []string
	for _, g := range x.L3Groups {
		groups = append(groups, fmt.Sprintf("%d (CPUs %s)", g.ID, g.CPUs))
	}
	line("L3 groups", "%s", orDash(strings.Join(groups, ", ")))
	line("NUMA nodes", "%s", orDash(x.NUMANodes))
	line("Mems", "%s", orDash(x.Mems))
	if len(x.Memory) > 0 {
		line("Memory", "%s", explainedMemoryText(x.Memory))
	}
	if x.Isolation == nil {
		line("Isolation", "none: %s CPUs are shared by its members", x.Pool)
		return
	}
	iso := x.Isolation
	fmt.Fprintln(w, "  Isolation:")
	sub := func(k, format string, a ...any) { fmt.Fprintf(w, "    %-14s %s\n", k+":", fmt.Sprintf(format, a...)) }
	irq := "not asked for (irq-isolation)"
	if iso.IRQIsolation {
		irq = "kept off its CPUs"
	}
	switch {
	case iso.DeviceIRQs == nil:
		irq += "; /proc/irq unreadable"
	case len(iso.DeviceIRQs) == 0:
		irq += "; no device IRQ may run on them now"
	default:
		irq += "; device IRQs that may run on them now: " + irqList(iso.DeviceIRQs)
		if iso.IRQIsolation {
			// Kernel-managed IRQs keep their affinity; audit says which fired.
			irq += " (`nri-cpupool audit` says which fire and why they stay)"
		}
	}
	sub("IRQs", "%s", irq)
	hk := "host processes are not moved (pools." + x.Pool + ".housekeeping: " + iso.Housekeeping + ")"
	if iso.Housekeeping != config.HousekeepingOff {
		hk = "host processes are kept off them (pools." + x.Pool + ".housekeeping: " + iso.Housekeeping + ")"
	}
	sub("Housekeeping", "%s", hk)
	part := "no"
	if iso.IsolatedPartition {
		part = "an isolated cgroup v2 partition"
	}
	if iso.PartitionInForce != nil {
		part += fmt.Sprintf(" (the kernel's isolated partitions hold its CPUs: %s)", yesNo(*iso.PartitionInForce))
	}
	sub("Partition", "%s", part)
	sub("Power class", "%s", cmp.Or(iso.PowerClass, "none (as the node has them)"))
	sub("Kernel", "isolcpus (no load balancing) on %s of them; nohz_full on %s", orNone(iso.DomainIsolated), orNone(iso.NohzFull))
	if iso.Offline != "" {
		sub("Offline", "%s: the kernel took them from its cpuset; they stay its own", iso.Offline)
	}
}

func ruleText(r *explainedRule) string {
	switch r.Kind {
	case ruleUnrecorded:
		return "not recorded (placed by an nri-cpupool before state schema 6)"
	case "annotation":
		return "annotation " + r.Detail
	case "qos":
		return "QoS: " + r.Detail
	case "default":
		// The policy says why when a rule would have given another pool
		// (allowedNamespaces kept a Guaranteed pod out of exclusive).
		if why, ok := strings.CutPrefix(r.Detail, "defaultPool: "); ok {
			return "the default pool (defaultPool): " + why
		}
		if len(r.Unmatched) > 0 {
			// A key meant for it may have missed it by a typo (below).
			return "the default pool (defaultPool): no annotation named it, and no claim or device asked for another"
		}
		return "the default pool (defaultPool): no annotation, claim or device asked for another"
	case "dra-claim":
		return "DRA: its " + r.Detail
	case "device-plugin":
		return "the kubelet's device plugin: its " + r.Detail
	}
	return r.Kind + " " + r.Detail
}

func explainedMemoryText(mem []explainedMemory) string {
	var parts []string
	for _, m := range mem {
		if m.Memory > 0 {
			parts = append(parts, fmt.Sprintf("node%d memory %s", m.Node, memoryAmount(m.Memory)))
		}
		for _, size := range slices.SortedFunc(maps.Keys(m.HugePages), func(a, b string) int { return cmp.Compare(pageSizeKB(a), pageSizeKB(b)) }) {
			parts = append(parts, fmt.Sprintf("node%d hugepages-%s %d", m.Node, size, m.HugePages[size]))
		}
	}
	return strings.Join(parts, ", ")
}

// irqList lists IRQ numbers, the first ten and a count of the rest.
func irqList(irqs []int) string {
	var s []string
	for _, n := range irqs[:min(len(irqs), 10)] {
		s = append(s, strconv.Itoa(n))
	}
	out := strings.Join(s, ", ")
	if len(irqs) > 10 {
		out += fmt.Sprintf(" and %d more (--json lists them)", len(irqs)-10)
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
