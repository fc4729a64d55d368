package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	nricpupool "github.com/cpupool/nri-cpupool"
	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/simulate"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// simulateStepFailed is simulate's exit code with --fail-on-refusal when
// a step failed (1 is any other failure, as audit's 3 is a finding).
const simulateStepFailed = 3

func runSimulate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", "simulate [--sysfs-root D | --topology T] [--config F] [--isolated-cpus LIST] --requests R [--json] [--fail-on-refusal]", stderr)
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	topology := fs.String("topology", "", "a topology YAML in the format of testdata/topologies, or the name of a shape there (the binary carries them), rendered for the run instead of a sysfs tree")
	cfgPath := fs.String("config", "", "configuration file (default: built-in defaults)")
	isolated := keyFlagVar(fs, "isolated-cpus", "isolatedCPUs", "`LIST` of CPUs taken as the kernel's isolated set (isolcpus=), overriding the config's isolatedCPUs",
		func(c *config.Config, v string) { c.IsolatedCPUs = &v })
	reqPath := fs.String("requests", "", "requests file (YAML, see docs/commands.md)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	failOnRefusal := fs.Bool("fail-on-refusal", false, "exit 3 when a step fails, after printing every step (for CI)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *reqPath == "" {
		fmt.Fprintln(stderr, "simulate needs --requests FILE")
		fs.Usage()
		return errUsage
	}
	if *topology != "" && *root != "" {
		return usageError(fs, "--topology and --sysfs-root: choose one (the node is rendered from the topology, or read below the sysfs root)")
	}
	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	if *isolated != "" {
		cfg.IsolatedCPUs = isolated // checked when parsed (keyFlag)
	}
	nodeRoot := sysfsRoot(*root, cfg)
	if *topology != "" {
		dir, err := renderTopology(*topology)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		nodeRoot = dir
	}
	topo, err := sysfs.Discover(nodeRoot)
	if err != nil {
		return err
	}
	file, err := simulate.Load(*reqPath)
	if err != nil {
		return err
	}
	runner, err := simulate.NewRunner(topo, cfg, nodeRoot)
	var misfit *simulate.MisfitError
	if errors.As(err, &misfit) && *isolated != "" {
		// What the node refuses of the list is the flag's, not the
		// config's: `--isolated-cpus: CPUs 200 do not exist`.
		for i := range misfit.Problems {
			if misfit.Problems[i].Key == "isolatedCPUs" {
				misfit.Problems[i].Key = "--isolated-cpus"
			}
		}
	}
	if err != nil {
		return err
	}
	results := runner.Run(file)
	if *asJSON {
		if err := printJSON(stdout, struct {
			Steps []simulate.Result `json:"steps"`
		}{results}); err != nil {
			return err
		}
		return stepsFailed(stderr, results, *failOnRefusal)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tACTION\tPOD/CONTAINER\tPOOL\tCPUS\tMEMS\tEXCLUSIVE FREE\tSHARED\tINFRA\tRESULT")
	for _, r := range results {
		outcome := "ok"
		if r.Error != "" {
			outcome = "error: " + r.Error
		} else if len(r.Updates) > 0 {
			outcome = fmt.Sprintf("ok, %s updated", plural.Count(len(r.Updates), "container"))
		}
		if r.Error == "" && len(r.Memory) > 0 {
			outcome += "; holds " + heldText(r.Memory)
		}
		if r.Warning != "" {
			outcome += "; warning: " + r.Warning
		}
		ex := r.Pools[pools.Exclusive]
		cpus := orDash(r.CPUs)
		if r.SharedCPUs != "" {
			cpus += " (+shared " + r.SharedCPUs + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s/%s/%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\n", r.Step, r.Action, r.Namespace, r.Pod, simulate.ContainerOrAll(r.Container), orDash(r.Pool), cpus, orDash(r.Mems),
			deref(ex.FreeSize), ex.Size, r.Pools[pools.Shared].Size, r.Pools[pools.Infra].Size, outcome)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printSimulatedMemory(stdout, cfg, results)
	printNoIsolated(stdout, results)
	return stepsFailed(stderr, results, *failOnRefusal)
}

// printNoIsolated says what to do when steps were refused because the
// exclusive pool is empty: most shapes boot without isolcpus, and the pool
// is carved from the isolated CPUs.
func printNoIsolated(stdout io.Writer, results []simulate.Result) {
	for _, r := range results {
		if r.Error != "" && r.Pool == pools.Exclusive && r.Pools[pools.Exclusive].Size == 0 {
			fmt.Fprintln(stdout, "\nThe exclusive pool is empty: the node has no isolated CPUs (isolcpus=). Give some with --isolated-cpus LIST or the config's isolatedCPUs, or use the exclusive-non-isolcpus pool.")
			return
		}
	}
}

// stepsFailed is simulate's verdict with --fail-on-refusal: exit 3 and how
// many steps failed when one did; without it the run succeeds whatever its
// steps did, the table saying which failed.
func stepsFailed(stderr io.Writer, results []simulate.Result, fail bool) error {
	failed := 0
	for _, r := range results {
		if r.Error != "" {
			failed++
		}
	}
	if !fail || failed == 0 {
		return nil
	}
	fmt.Fprintf(stderr, "nri-cpupool simulate: %d of %s failed (--fail-on-refusal)\n", failed, plural.Count(len(results), "step"))
	return exitError{simulateStepFailed}
}

// renderTopology renders a topology for simulate into a new temporary
// directory, which the caller removes: topology is a YAML file in the
// format of testdata/topologies, or the name of a shape there, which the
// binary carries (package nricpupool), so that a packaged nri-cpupool
// finds it from any directory. Only the shape simulated is written, not
// the gigabyte of `make fixtures`.
func renderTopology(topology string) (string, error) {
	spec, err := loadTopology(topology)
	if err != nil {
		return "", err
	}
	out, err := os.MkdirTemp("", "nri-cpupool-simulate-")
	if err != nil {
		return "", fmt.Errorf("rendering topology %s: %w", topology, err)
	}
	if err := spec.Write(out); err != nil {
		os.RemoveAll(out)
		return "", fmt.Errorf("rendering topology %s: %w", topology, err)
	}
	return out, nil
}

// loadTopology reads a topology file, or, when there is no such file and
// topology is a bare name, the shipped shape of that name. A file wins:
// the shapes are examples, and a user's own file of the same name is what
// the user meant.
func loadTopology(topology string) (*fixture.Spec, error) {
	if _, err := os.Stat(topology); err != nil {
		if strings.ContainsAny(topology, "/.") {
			return nil, fmt.Errorf("topology %s: %w", topology, err)
		}
		b, ok := nricpupool.Topology(topology)
		if !ok {
			return nil, unknownTopology(topology)
		}
		spec, err := fixture.ParseSpec(topology, b)
		if err != nil {
			return nil, fmt.Errorf("shipped topology %s: %w", topology, err)
		}
		return spec, nil
	}
	spec, err := fixture.LoadSpec(topology)
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", topology, err)
	}
	return spec, nil
}

// unknownTopology refuses a name no shipped shape has, with the nearest
// name there is, or, when none is near, every name.
func unknownTopology(name string) error {
	names := nricpupool.TopologyNames()
	msg := fmt.Sprintf("topology %q: no such file, and no shipped topology has that name", name)
	if near := nearestName(name, names); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", near)
	} else {
		msg += "; the shipped ones are " + strings.Join(names, ", ") + " (or give the path of a topology YAML)"
	}
	return errors.New(msg)
}

// printSimulatedMemory prints the NUMA nodes' memory after the last step,
// when the requests asked for memory (the results carry it then).
func printSimulatedMemory(stdout io.Writer, cfg *config.Config, results []simulate.Result) {
	if len(results) == 0 || len(results[len(results)-1].NUMAMemory) == 0 {
		return
	}
	fmt.Fprintln(stdout)
	if !cfg.PinMemory {
		fmt.Fprintln(stdout, "pinMemory is off: no container's mems are pinned, so no memory or hugepages are counted or placed")
	}
	last := results[len(results)-1]
	printNUMAMemory(stdout, fmt.Sprintf("NUMA MEMORY AFTER STEP %d", last.Step), last.NUMAMemory)
}

// heldText says what a container holds the way a refusal says what is
// free, by resource and node: "hugepages-2Mi node1 16, memory node1 64Mi".
func heldText(held []simulate.HeldMemory) string {
	var sizes []string
	for _, h := range held {
		for size := range h.HugePages {
			if !slices.Contains(sizes, size) {
				sizes = append(sizes, size)
			}
		}
	}
	slices.SortFunc(sizes, func(a, b string) int { return cmp.Compare(pageSizeKB(a), pageSizeKB(b)) })
	var parts []string
	for _, size := range sizes {
		var on []string
		for _, h := range held {
			if n := h.HugePages[size]; n > 0 {
				on = append(on, fmt.Sprintf("node%d %d", h.Node, n))
			}
		}
		parts = append(parts, "hugepages-"+size+" "+strings.Join(on, " "))
	}
	var on []string
	for _, h := range held {
		if h.Memory > 0 {
			on = append(on, fmt.Sprintf("node%d %s", h.Node, memoryAmount(h.Memory)))
		}
	}
	if len(on) > 0 {
		parts = append(parts, "memory "+strings.Join(on, " "))
	}
	return strings.Join(parts, ", ")
}

// pageSizeKB orders page sizes named the Kubernetes way; a name that is
// none sorts first.
func pageSizeKB(name string) int64 {
	kb, _ := config.HugePageSizeKB(name)
	return kb
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
