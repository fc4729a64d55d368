// Package cli implements the nri-cpupool subcommands. It is the top floor
// of the module: it may import any package, and only main imports it.
package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/config"
)

// Version is set at build time with -ldflags "-X .../cmd/nri-cpupool/internal/cli.Version=...".
var Version = "dev"

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run the NRI plugin daemon", runPlugin},
		{"topology", "show the node's CPU topology and pool layout", runTopology},
		{"validate", "check a configuration against the node", runValidate},
		{"simulate", "replay container requests through the allocator", runSimulate},
		{"status", "show pools and assignments from the state file", runStatus},
		{"audit", "show what still disturbs each held exclusive CPU (IRQs, threads, isolation)", runAudit},
		{"version", "print the version", runVersion},
	}
}

// errUsage marks an error already explained by the flag package.
var errUsage = errors.New("usage")

// exitError carries a specific exit code (validate's findings).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Main runs a subcommand and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 && os.Getenv(api.PluginSocketEnvVar) != "" {
		// Launched by the runtime from its plugin directory, without arguments.
		args = []string{"run"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		var ee exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.As(err, &ee):
			return ee.code
		}
		fmt.Fprintf(stderr, "nri-cpupool %s: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stderr, "nri-cpupool: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "nri-cpupool — CPU pools and NUMA-aware pinning for Kubernetes, as an NRI plugin.")
	fmt.Fprintln(w, "\nUsage: nri-cpupool COMMAND [flags]   (nri-cpupool COMMAND --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set whose --help prints the command's synopsis.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: nri-cpupool %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and refuses stray arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments: "+strings.Join(fs.Args(), " "))
	}
	return nil
}

// usageError explains a misuse of the flags, shows the usage and returns
// errUsage.
func usageError(fs *flag.FlagSet, msg string) error {
	fmt.Fprintln(fs.Output(), msg)
	fs.Usage()
	return errUsage
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "nri-cpupool %s\n", Version)
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintf(stdout, "go: %s\n", bi.GoVersion)
		for _, d := range bi.Deps {
			if d.Path == "github.com/containerd/nri" {
				fmt.Fprintf(stdout, "nri: %s\n", d.Version)
			}
		}
	}
	return nil
}

// sysfsRootUsage is the --sysfs-root flag's help, the same for every
// command that reads the node.
const sysfsRootUsage = "directory holding sys/ and proc/ (default: the config's sysfsRoot, /)"

// sysfsRoot is where a command reads the node from: the --sysfs-root flag
// when given, else the configuration's sysfsRoot. cfg may be nil (no
// configuration given): the default configuration's then.
func sysfsRoot(flag string, cfg *config.Config) string {
	switch {
	case flag != "":
		return flag
	case cfg != nil:
		return cfg.SysfsRoot
	}
	return config.Default().SysfsRoot
}

// printJSON writes v indented, for the commands' --json output.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
