package cli

import (
	"fmt"
	"io"
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
	if err := parse(fs, args); err != nil {
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
			outcome = fmt.Sprintf("ok, %d container(s) updated", len(r.Updates))
		}
		ex := r.Pools[pools.Exclusive]
		cpus := orDash(r.CPUs)
		if r.SharedCPUs != "" {
			cpus += " (+shared " + r.SharedCPUs + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s/%s/%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\n", r.Step, r.Action, r.Namespace, r.Pod, simulate.ContainerOrAll(r.Container), orDash(r.Pool), cpus, orDash(r.Mems),
			deref(ex.FreeSize), ex.Size, r.Pools[pools.Shared].Size, r.Pools[pools.Infra].Size, outcome)
	}
	return tw.Flush()
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
