package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/simulate"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

func runSimulate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", "simulate [--sysfs-root D] [--config F] --requests R [--json]", stderr)
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	cfgPath := fs.String("config", "", "configuration file (default: built-in defaults)")
	reqPath := fs.String("requests", "", "requests file (YAML, see docs/commands.md)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *reqPath == "" {
		fmt.Fprintln(stderr, "simulate needs --requests FILE")
		fs.Usage()
		return errUsage
	}
	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	nodeRoot := sysfsRoot(*root, cfg)
	topo, err := sysfs.Discover(nodeRoot)
	if err != nil {
		return err
	}
	file, err := simulate.Load(*reqPath)
	if err != nil {
		return err
	}
	runner, err := simulate.NewRunner(topo, cfg, nodeRoot)
	if err != nil {
		return err
	}
	results := runner.Run(file)
	if *asJSON {
		return printJSON(stdout, struct {
			Steps []simulate.Result `json:"steps"`
		}{results})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tACTION\tPOD/CONTAINER\tPOOL\tCPUS\tMEMS\tEXCLUSIVE FREE\tSHARED\tINFRA\tRESULT")
	for _, r := range results {
		outcome := "ok"
		if r.Error != "" {
			outcome = "error: " + r.Error
		} else if len(r.Updates) > 0 {
			outcome = fmt.Sprintf("ok, %s updated", plural(len(r.Updates), "container"))
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
	return nil
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
