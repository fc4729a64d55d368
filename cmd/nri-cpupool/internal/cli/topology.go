package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// TopologyReport is the JSON printed by `topology --json`; its fields are
// an interface scripts depend on (docs/commands.md "topology --json").
type TopologyReport struct {
	Online         string            `json:"online"`
	Offline        string            `json:"offline"`
	Isolated       string            `json:"isolated"`
	IsolatedSource string            `json:"isolatedSource"`
	Sockets        []int             `json:"sockets"`
	NUMANodes      []NUMAReport      `json:"numaNodes"`
	L3Groups       []GroupReport     `json:"l3Groups"`
	CPUs           []CPUReport       `json:"cpus"`
	Pools          map[string]string `json:"pools,omitempty"`
	Problems       []config.Problem  `json:"problems,omitempty"`
	PoolsByNUMA    []NUMAPoolsReport `json:"poolsByNUMA,omitempty"`
}

// NUMAReport describes one NUMA node.
type NUMAReport struct {
	ID         int    `json:"id"`
	CPUs       string `json:"cpus"`
	Distance   []int  `json:"distance"`
	HasMemory  bool   `json:"hasMemory"`
	MemTotalKB int64  `json:"memTotalKB"`
}

// GroupReport is an L3 (uncore cache) group; cacheId is the kernel's id
// of that cache (-1 when not reported).
type GroupReport struct {
	ID      int    `json:"id"`
	CPUs    string `json:"cpus"`
	CacheID int    `json:"cacheId"`
}

// CPUReport is one logical CPU; core is unique per physical core across the
// node, unlike the kernel's core_id.
type CPUReport struct {
	ID          int    `json:"id"`
	Online      bool   `json:"online"`
	Isolated    bool   `json:"isolated"`
	Socket      int    `json:"socket"`
	Die         int    `json:"die"`
	NUMA        int    `json:"numa"`
	Core        int    `json:"core"`
	CoreID      int    `json:"coreId"`
	Siblings    string `json:"siblings"`
	L3          int    `json:"l3"`
	BaseFreqKHz int64  `json:"baseFrequencyKHz,omitempty"`
	Pool        string `json:"pool,omitempty"`
}

// NUMAPoolsReport is the pool layout restricted to one NUMA node.
type NUMAPoolsReport struct {
	NUMA  int               `json:"numa"`
	Pools map[string]string `json:"pools"`
}

func runTopology(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("topology", "topology [--sysfs-root D] [--config F] [--json | --map [--color WHEN]]", stderr)
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	cfgPath := fs.String("config", "", "configuration file; when given, the pool layout is shown")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	asMap := fs.Bool("map", false, "draw the node: sockets, NUMA nodes, L3 groups, cores and, with --config, each CPU's pool")
	color := colorAuto
	fs.Var(&color, "color", colorUsage)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *asJSON && *asMap {
		return usageError(fs, "--json and --map: choose one")
	}
	var cfg *config.Config
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	topo, err := sysfs.Discover(sysfsRoot(*root, cfg))
	if err != nil {
		return err
	}
	var layout *allocator.Layout
	var problems config.Problems
	if cfg != nil {
		// As the daemon lays it out (config/nodecheck): an offline CPU a
		// list names is a warning, as in validate.
		layout, problems = allocator.BuildLayoutRunning(topo, cfg)
		if problems.HasErrors() {
			// The daemon would not start with it: what was carved before
			// the error is no layout (a count that cannot be carved left
			// every CPU in infra). The node is shown, and why it does not
			// fit, in every format alike (review 58, item 10).
			layout = nil
		}
	}
	report := buildTopologyReport(topo, layout, problems)
	switch {
	case *asJSON:
		if err := printJSON(stdout, report); err != nil {
			return err
		}
	case *asMap:
		printMap(stdout, layoutMap(topo, layout), lookTerminal(color, stdout))
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
	default:
		printTopology(stdout, topo, report)
	}
	if problems.HasErrors() {
		return fmt.Errorf("%s does not fit this node: %s above", *cfgPath, plural.Count(len(problems.Errors()), "error"))
	}
	return nil
}

// layoutMap is what topology --map draws: the node and, with a
// configuration, its pool layout; nothing runs yet.
func layoutMap(topo *sysfs.Topology, l *allocator.Layout) nodeMap {
	m := nodeMap{topo: topo, marks: nodeMarks(topo)}
	if l != nil {
		m.pools = map[string]cpuset.CPUSet{pools.Exclusive: l.Exclusive, pools.Shared: l.Shared, pools.Infra: l.Infra,
			pools.ExclusiveNonIsolcpus: l.ExclusiveNonIsolcpus}
	}
	return m
}

func poolOf(l *allocator.Layout, cpu int) string {
	for _, p := range []string{pools.Exclusive, pools.Shared} {
		if l.Pool(p).Contains(cpu) {
			return p
		}
	}
	if l.Infra.Contains(cpu) {
		if l.Reserved.Contains(cpu) {
			return "infra (reserved)"
		}
		return pools.Infra
	}
	return ""
}

func buildTopologyReport(topo *sysfs.Topology, l *allocator.Layout, problems config.Problems) TopologyReport {
	r := TopologyReport{Online: topo.Online.String(), Offline: topo.Offline.String(), Isolated: topo.Isolated.String(),
		IsolatedSource: topo.IsolatedSource, Sockets: topo.Sockets(), Problems: problems}
	for _, n := range topo.NUMANodes {
		r.NUMANodes = append(r.NUMANodes, NUMAReport{n.ID, n.CPUs.String(), n.Distance, n.HasMemory, n.MemTotalKB})
	}
	for _, g := range topo.L3Groups() {
		gr := GroupReport{ID: g, CacheID: sysfs.Unknown}
		for _, c := range topo.CPUs {
			if c.Online && c.L3 == g {
				gr.CPUs, gr.CacheID = c.L3Cache.SharedCPUs.String(), c.L3Cache.ID
				break
			}
		}
		r.L3Groups = append(r.L3Groups, gr)
	}
	for _, c := range topo.CPUs {
		cr := CPUReport{ID: c.ID, Online: c.Online, Isolated: topo.Isolated.Contains(c.ID), Socket: c.Socket, Die: c.Die,
			NUMA: c.NUMA, Core: c.Core, CoreID: c.CoreID, Siblings: c.Siblings.String(), L3: c.L3, BaseFreqKHz: c.BaseFreqKHz}
		if l != nil {
			cr.Pool = poolOf(l, c.ID)
		}
		r.CPUs = append(r.CPUs, cr)
	}
	if l != nil {
		r.Pools = poolMap(l.Exclusive, l.Shared, l.Infra, l.ExclusiveNonIsolcpus)
		for _, n := range topo.NUMANodes {
			in := func(s cpuset.CPUSet) cpuset.CPUSet { return s.Intersection(n.CPUs) }
			r.PoolsByNUMA = append(r.PoolsByNUMA, NUMAPoolsReport{n.ID, poolMap(in(l.Exclusive), in(l.Shared), in(l.Infra), in(l.ExclusiveNonIsolcpus))})
		}
	}
	return r
}

func poolMap(exclusive, shared, infra, eni cpuset.CPUSet) map[string]string {
	return map[string]string{
		pools.Exclusive: exclusive.String(), pools.Shared: shared.String(),
		pools.Infra: infra.String(), pools.ExclusiveNonIsolcpus: eni.String(),
	}
}

// printTopology renders the report as tables: a summary, the NUMA nodes,
// the L3 groups, the cores and, with a config, the pools per NUMA node.
func printTopology(w io.Writer, topo *sysfs.Topology, r TopologyReport) {
	printSummary(w, topo, r)
	fmt.Fprintln(w)
	printNUMANodes(w, topo)
	fmt.Fprintln(w)
	printL3Groups(w, r)
	fmt.Fprintln(w)
	printCores(w, r)
	if r.Pools != nil {
		fmt.Fprintln(w)
		printPools(w, r)
	} else if len(r.Problems) > 0 {
		fmt.Fprintln(w)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, p)
	}
}

func printSummary(w io.Writer, topo *sysfs.Topology, r TopologyReport) {
	threads := 0
	for _, c := range topo.CPUs {
		if c.Online {
			threads = max(threads, c.Siblings.Size())
		}
	}
	fmt.Fprintf(w, "CPUs: %d online (%s), offline: %s, isolated: %s%s\n", topo.Online.Size(), r.Online, orNone(r.Offline), orNone(r.Isolated), source(r.IsolatedSource))
	fmt.Fprintf(w, "Sockets: %d   NUMA nodes: %d   L3 groups: %d   cores: %d   threads per core: %d   SMT active: %v\n",
		len(r.Sockets), len(r.NUMANodes), len(r.L3Groups), topo.Cores(), threads, topo.SMTActive)
}

func printNUMANodes(w io.Writer, topo *sysfs.Topology) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NUMA\tSOCKET\tCPUS\tL3 GROUPS\tMEMORY\tDISTANCE")
	for _, n := range topo.NUMANodes {
		sockets := map[int]bool{}
		l3 := map[int]bool{}
		for _, c := range topo.CPUs {
			if c.NUMA == n.ID && c.Online {
				sockets[c.Socket], l3[c.L3] = true, true
			}
		}
		mem := "none"
		if n.HasMemory {
			mem = fmt.Sprintf("%d MiB", n.MemTotalKB/1024)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%v\n", n.ID, keys(sockets), n.CPUs, keys(l3), mem, n.Distance)
	}
	tw.Flush()
}

func printL3Groups(w io.Writer, r TopologyReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "L3\tCPUS")
	for _, g := range r.L3Groups {
		fmt.Fprintf(tw, "%d\t%s\n", g.ID, g.CPUs)
	}
	tw.Flush()
}

// printCores prints one line per online core, with the pools its threads
// belong to.
func printCores(w io.Writer, r TopologyReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CORE\tSOCKET\tNUMA\tL3\tTHREADS\tBASE MHZ\tPOOL")
	seen := map[int]bool{}
	poolByCPU := map[int]string{}
	for _, c := range r.CPUs {
		poolByCPU[c.ID] = c.Pool
	}
	for _, c := range r.CPUs {
		if !c.Online || seen[c.Core] {
			continue
		}
		seen[c.Core] = true
		freq := "-"
		if c.BaseFreqKHz > 0 {
			freq = fmt.Sprint(c.BaseFreqKHz / 1000)
		}
		var pools []string
		sib, _ := cpuset.Parse(c.Siblings)
		for _, id := range sib.List() {
			if p := poolByCPU[id]; p != "" && !slices.Contains(pools, p) {
				pools = append(pools, p)
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\n", c.Core, c.Socket, c.NUMA, c.L3, c.Siblings, freq, orDash(strings.Join(pools, "+")))
	}
	tw.Flush()
}

// printPools prints the pool layout per NUMA node and in all.
func printPools(w io.Writer, r TopologyReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NUMA\tEXCLUSIVE\tSHARED\tINFRA\tEXCLUSIVE-NON-ISOLCPUS")
	row := func(label string, m map[string]string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", label, orDash(m[pools.Exclusive]), orDash(m[pools.Shared]), orDash(m[pools.Infra]), orDash(m[pools.ExclusiveNonIsolcpus]))
	}
	for _, n := range r.PoolsByNUMA {
		row(strconv.Itoa(n.NUMA), n.Pools)
	}
	row("all", r.Pools)
	tw.Flush()
}

// keys lists a set's members in order, separated by commas.
func keys(m map[int]bool) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, strconv.Itoa(k))
	}
	return strings.Join(out, ",")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func source(s string) string {
	if s == "" {
		return ""
	}
	return " (from " + s + ")"
}
