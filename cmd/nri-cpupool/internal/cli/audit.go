package cli

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/audit"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// auditNotClean is audit's exit code when a held exclusive CPU is not
// clean (1 is any other failure, and a CPU whose verdict is unknown: the
// audit could not check it, which is no finding either way).
const auditNotClean = 3

func runAudit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", "audit [--config F] [--state-file F] [--proc-root D] [--sysfs-root D] [--cgroup-root D] [--sample 1s] [--json]", stderr)
	cfgPath := configFlag(fs, "the node's configuration file, as run reads it (a missing default file means built-in defaults); its stateFile, procRoot, sysfsRoot, cgroupRoot and kernelWork apply")
	stateFile := fs.String("state-file", "", "the plugin's state file (default: the config's stateFile)")
	procRoot := fs.String("proc-root", "", "where procfs is mounted (default: the config's procRoot, /proc)")
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	cgroupRoot := fs.String("cgroup-root", "", "the cgroup mount (default: the config's cgroupRoot)")
	sample := durationVar(fs, "sample", time.Second, time.Millisecond, time.Minute, "`DURATION` to count interrupts, with its unit (500ms, 2s; from 1ms to 1m)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	cfg, err := readNodeConfig(*cfgPath, stderr)
	if err != nil {
		return err
	}
	for _, o := range []struct{ flag, dst *string }{{stateFile, &cfg.StateFile}, {procRoot, &cfg.ProcRoot}, {cgroupRoot, &cfg.CgroupRoot}} {
		if *o.flag != "" {
			*o.dst = *o.flag
		}
	}
	st, err := readState(cfg.StateFile)
	if err != nil {
		return err
	}
	holdings, err := auditHoldings(st)
	if err != nil {
		return err
	}
	bootID, _ := os.ReadFile(filepath.Join(cfg.ProcRoot, "sys/kernel/random/boot_id"))
	_, refused, thisBoot, err := hostfiles.ReadJournal(hostfiles.JournalPath(cfg.StateFile), string(bootID))
	if err != nil {
		fmt.Fprintf(stderr, "nri-cpupool audit: %v; every device IRQ is taken as movable\n", err)
	}
	if !thisBoot {
		refused = nil
	}
	rep, err := audit.Gather(holdings, audit.Options{ProcRoot: cfg.ProcRoot, SysfsRoot: sysfsRoot(*root, cfg), CgroupRoot: cgroupV2Root(cfg.CgroupRoot),
		Sample: *sample, Refused: refused, RPSKept: cfg.RPSHeld(), WorkqueuesKept: cfg.WorkqueuesHeld()})
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSON(stdout, rep)
	} else {
		err = audit.WriteText(stdout, rep)
	}
	if err != nil {
		return err
	}
	if rep.Clean {
		return nil
	}
	unknown := cpuset.New()
	for _, c := range rep.CPUs {
		switch {
		case c.Unknown:
			unknown = unknown.Union(cpuset.New(c.CPU))
		case !c.Clean:
			return exitError{auditNotClean}
		}
	}
	return fmt.Errorf("the verdict on %s (%s) is unknown: %s does not show the host's processes (see the note)", plural.Count(unknown.Size(), "held CPU"), unknown, cfg.ProcRoot)
}

// auditHoldings are the exclusive CPUs the state says are held: running
// exclusive containers (with their reserved siblings) and holds for
// stopped ones.
func auditHoldings(st *state.State) ([]audit.Holding, error) {
	var out []audit.Holding
	add := func(id, suffix string, c state.ContainerState) error {
		if !pools.IsExclusive(c.Pool) {
			return nil
		}
		cpus, err := cpulist.Parse(c.CPUs)
		if err != nil {
			return fmt.Errorf("state: container %s: %w", id, err)
		}
		reserved, err := cpulist.Parse(c.Reserved)
		if err != nil {
			return fmt.Errorf("state: container %s: %w", id, err)
		}
		out = append(out, audit.Holding{CPUs: cpus.Union(reserved), Owner: c.PodNamespace + "/" + c.PodName + "/" + c.Container + suffix, Pool: c.Pool, ContainerID: id,
			PowerClass: c.PowerClass})
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(st.Containers)) {
		if err := add(id, "", st.Containers[id]); err != nil {
			return nil, err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(st.Held)) {
		if err := add("", " (stopped, held)", st.Held[key].ContainerState); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cgroupV2Root is the cgroup mount when it is the unified hierarchy (the
// only one with isolated partitions), else "".
func cgroupV2Root(root string) string {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return root
	}
	return ""
}
