package cli

// restore-host: give the host files the plugin changed their originals
// back, with the daemon stopped for good. The daemon's stop restores
// nothing (its containers keep running, and the next start decides), so a
// package's removal, or an operator taking the plugin off a node, runs
// this; after a removal no binary would be left to read the journal.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
)

func runRestoreHost(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("restore-host", "restore-host [--config F] [--state-file F] [--proc-root D] [--sysfs-root D] [--cgroup-root D] [--json]", stderr)
	cfgPath := configFlag(fs, "the node's configuration file, as run reads it (a missing default file means built-in defaults); its stateFile, procRoot, sysfsRoot, cgroupRoot and irq.irqbalance apply")
	stateFile := fs.String("state-file", "", "the plugin's state file, beside which the journal host-originals.json lies (default: the config's stateFile)")
	procRoot := fs.String("proc-root", "", "where procfs is mounted (default: the config's procRoot, /proc)")
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	cgroupRoot := fs.String("cgroup-root", "", "the cgroup mount (default: the config's cgroupRoot)")
	asJSON := fs.Bool("json", false, "print what was restored as JSON (fields in docs/commands.md)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	flags := []pathFlag{{"--state-file", stateFile}, {"--proc-root", procRoot}, {"--sysfs-root", root}, {"--cgroup-root", cgroupRoot}}
	cfg, err := restoreHostConfig(*cfgPath, flags, stderr)
	if err != nil {
		return err
	}
	for i, dst := range []*string{&cfg.StateFile, &cfg.ProcRoot, &cfg.SysfsRoot, &cfg.CgroupRoot} {
		if v := *flags[i].value; v != "" {
			*dst = v
		}
	}
	if held, _ := state.Held(cfg.StateFile); held {
		return daemonRuns(state.LockPath(cfg.StateFile), state.Holder(state.LockPath(cfg.StateFile)))
	}
	journal := hostfiles.JournalPath(cfg.StateFile)
	bootID, _ := os.ReadFile(filepath.Join(cfg.ProcRoot, "sys/kernel/random/boot_id"))
	records, _, thisBoot, err := hostfiles.ReadJournal(journal, string(bootID))
	if err != nil {
		return fmt.Errorf("%w; nothing restored: the host files it lists keep the plugin's values until the next reboot, which resets them (the file is left as it is, for a look)", err)
	}
	empty := &plugin.HostRestore{Journal: journal, Restored: []plugin.RestoredFile{}, Left: []plugin.LeftFile{}}
	switch {
	case len(records) == 0:
		if *asJSON {
			return printJSON(stdout, empty)
		}
		if _, err := os.Stat(journal); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stdout, "nothing to restore: no journal %s (the plugin changed no host file, or everything is restored)\n", journal)
		} else {
			fmt.Fprintf(stdout, "nothing to restore: the journal %s holds no record\n", journal)
		}
		return nil
	case !thisBoot:
		if *asJSON {
			return printJSON(stdout, empty)
		}
		fmt.Fprintf(stdout, "nothing to restore: %s holds %s of an earlier boot; the reboot reset those files (the daemon sets them aside at its start)\n",
			journal, plural.Count(len(records), "record"))
		return nil
	}
	// Held until the end, so that no daemon starts and changes the files
	// meanwhile.
	lock, err := state.TryLock(cfg.StateFile)
	if errors.Is(err, state.ErrLocked) {
		return daemonRuns(state.LockPath(cfg.StateFile), state.Holder(state.LockPath(cfg.StateFile)))
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	if w := lock.Warning(); w != "" {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetLevel(logrus.WarnLevel)
	res, err := plugin.RestoreHost(cfg, log)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		writeHostRestore(stdout, res)
	}
	if n := len(res.Left); n > 0 {
		return fmt.Errorf("%s not restored, kept in %s: run restore-host again once the cause is fixed (a reboot resets them too)", plural.Count(n, "host file"), res.Journal)
	}
	return nil
}

// pathFlag is one of restore-host's flags that say where the daemon's
// files lie.
type pathFlag struct {
	name  string
	value *string
}

// restoreHostConfig reads the node's config as run does. Unlike status,
// audit and explain (readNodeConfig), restore-host does not go on with
// the built-in defaults when the config is refused: their state file and
// roots are not the daemon's, so the node's journal would read as missing
// or of an earlier boot, "nothing to restore", exit 0, and a package's
// removal would go on with nothing put back. Only when
// the flags give the state file and every root is the config not needed.
func restoreHostConfig(path string, flags []pathFlag, stderr io.Writer) (*config.Config, error) {
	cfg, err := loadRunConfig(path)
	switch {
	case err == nil:
		return cfg, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EISDIR):
		return nil, err
	}
	var missing []string
	for _, f := range flags {
		if *f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the node's config is refused: %w; nothing restored: the journal lies beside the daemon's state file, under its roots, which the built-in defaults are not; "+
			"fix the config (nri-cpupool validate --config %s lists its problems) and run again, or give the daemon's state file and roots as flags: %s missing", err, path, joinFlags(missing))
	}
	fmt.Fprintf(stderr, "warning: the node's config is refused, so restore-host uses the flags' state file and roots, and the built-in defaults' irq settings: %v\n", err)
	return config.Default(), nil
}

// joinFlags lists flag names as a sentence does: "a, b and c".
func joinFlags(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// daemonRuns is restore-host's refusal while a daemon holds the state
// directory: it wants some of the files, and would change them again.
func daemonRuns(lockPath, holder string) error {
	return fmt.Errorf("nri-cpupool runs on this state directory (%s is held by %s): stop it first (systemctl disable --now nri-cpupool; under Kubernetes, take its pod off the node), "+
		"or turn its features off in its config and let it restore the files itself", lockPath, holder)
}

func writeHostRestore(w io.Writer, res *plugin.HostRestore) {
	for _, f := range res.Restored {
		switch f.Outcome {
		case "gone":
			fmt.Fprintf(w, "gone      %s (%s): no longer exists, nothing to put back\n", f.Path, f.Owner)
		case "widened":
			fmt.Fprintf(w, "widened   %s (%s): its parent's CPUs, which its empty original gave it (the kernel refuses an empty cpuset.cpus while the cgroup has tasks)\n", f.Path, f.Owner)
		case "dropped":
			fmt.Fprintf(w, "dropped   %s (%s): belongs to something else now, left as it is (original was %q)\n", f.Path, f.Owner, f.Original)
		default:
			fmt.Fprintf(w, "restored  %s (%s): %s\n", f.Path, f.Owner, oneLine(f.Original))
		}
	}
	for _, f := range res.Left {
		fmt.Fprintf(w, "LEFT      %s (%s): original %s: %s\n", f.Path, f.Owner, oneLine(f.Original), f.Reason)
	}
	fmt.Fprintf(w, "%s handled from %s, %s left\n", plural.Count(len(res.Restored), "host file"), res.Journal, plural.Count(len(res.Left), "file"))
}

// oneLine quotes a value that would not read well bare.
func oneLine(v string) string {
	if v == "" || strings.ContainsAny(v, "\n\t \"") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
