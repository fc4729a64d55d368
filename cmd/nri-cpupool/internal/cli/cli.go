// Package cli implements the nri-cpupool subcommands. It is the top floor
// of the module: it may import any package, and only main imports it.
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

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
		{"explain", "say why a pod's containers got their CPUs, or why they were refused", runExplain},
		{"restore-host", "put back the host files the plugin changed (the daemon stopped for good)", runRestoreHost},
		{"version", "print the version (also --version)", runVersion},
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
	// Asked for, help is the output (stdout, exit 0), as with any Go
	// tool and as `nri-cpupool --help | less` wants; a misuse (no command,
	// an unknown one) is an error: its usage goes to stderr, exit 2.
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		usage(stdout)
		return 0
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	// --version is the version command, as many tools have it (review
	// 58, item 14); -v is not: it means verbose to Go's tools.
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
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
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set whose --help prints the command's synopsis.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		// fs.Output(): parse sends it to stdout when --help asked for it.
		fmt.Fprintf(fs.Output(), "Usage: nri-cpupool %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and refuses stray arguments. The usage that --help
// (-h) asks for is printed on stdout; a misuse's message and usage go to
// the flag set's output, stderr (exit 2).
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments: "+strings.Join(fs.Args(), " "))
	}
	return nil
}

// parseFlags is parse for a command that takes arguments: it leaves them
// in fs.Args().
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	errOut := fs.Output()
	var printed bytes.Buffer
	fs.SetOutput(&printed)
	err := fs.Parse(args)
	fs.SetOutput(errOut)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			stdout.Write(printed.Bytes())
			return err
		}
		errOut.Write(printed.Bytes())
		return errUsage
	}
	return nil
}

// durationFlag is a duration flag whose refusal says what a duration is:
// the flag package's own says only "parse error" (`--sample 5`). The flag
// package adds the flag's name and the value given. A value outside
// [min, max] is refused the same way: a bad flag value is a misuse (exit
// 2), whether it is no duration or one out of range.
type durationFlag struct {
	d        *time.Duration
	min, max time.Duration
}

func (f durationFlag) String() string {
	if f.d == nil { // the flag package's zero value, for its defaults
		return "0s"
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with its unit, such as 500ms, 2s or 1m (a bare number has none)")
	}
	if v < f.min || v > f.max {
		return fmt.Errorf("want a duration between %s and %s", shortDuration(f.min), shortDuration(f.max))
	}
	*f.d = v
	return nil
}

// shortDuration is a duration as people write it: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// durationVar defines a duration flag (durationFlag) that takes values
// from min to max.
func durationVar(fs *flag.FlagSet, name string, value, min, max time.Duration, usage string) *time.Duration {
	d := value
	fs.Var(durationFlag{d: &d, min: min, max: max}, name, usage)
	return &d
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
	if err := parse(fs, args, stdout); err != nil {
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
