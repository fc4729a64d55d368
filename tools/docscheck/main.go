// Command docscheck keeps the documentation true to the code: every config
// key, annotation, metric, pod Event reason, command and command flag that
// the code defines must be documented in docs/, and every relative
// Markdown link of README.md and docs/ must resolve. `make lint` runs it from the
// repository root:
//
//	go run ./tools/docscheck [-root .] [-docs docs] [-readme README.md] [-monitoring deploy/monitoring] [-architecture architecture.md]
//	go run ./tools/docscheck -list   # the names it reads from the code
//
// No list of names is kept here; each kind is read from the code:
//
//   - Config keys: the config.Config type, walked by reflection over its
//     `yaml` struct tags, gives dotted paths such as pools.exclusive.count
//     or power.unsupported. A map's key is the placeholder segment <name>;
//     a type that decodes itself (a yaml.Unmarshaler, such as
//     config.Duration) is a leaf.
//   - Annotations: every string constant of the module's non-test Go
//     files whose value is <word>.cpupool.dev (allocator.AnnotationPool
//     and the others), found with go/ast.
//   - Metrics: every name given to the Prometheus client library in the
//     module's non-test Go files: the first argument of prometheus.NewDesc
//     and the Namespace, Subsystem and Name fields of a prometheus.*Opts
//     literal, as string literals or constants. A name docscheck cannot
//     read is itself a problem.
//   - Pod Event reasons: every string constant of the module's non-test Go
//     files whose value is CPUPool<UpperCamelCase> (plugin.EventRefused
//     and the others), the REASON kubectl shows.
//   - Commands: the []command{...} table of cmd/nri-cpupool/internal/cli,
//     and each command's flags: the flag.FlagSet definitions (fs.String,
//     fs.BoolVar, fs.Var, ...) in its run function and in the package's
//     functions it calls that take a *flag.FlagSet.
//   - Make targets: the .PHONY targets of the Makefile, except the
//     default goal (the first rule, what a bare `make` runs).
//
// A name is documented when it appears in code, that is in backticks or in
// a fenced code block, in some docs/**/*.md file:
//
//   - an annotation, a metric or a pod Event reason as a whole word (`cpupool_containers{pool}`
//     documents cpupool_containers);
//   - a command as `nri-cpupool <command>`, a flag as `--<flag>` (a flag
//     shared by several commands is documented once for all), a make
//     target as `make <target>`;
//   - a config key in backticks only (a YAML example does not document a
//     key), written in full (`dra.enabled`, also in `dra.enabled: true`),
//     where a map segment may be any <placeholder> or a concrete name
//     (`allowedNamespaces.<pool>`, `power.classes.lowlat.governor`) and a
//     segment that is a pool name may be a <placeholder>
//     (`pools.<pool>.irqIsolation` documents pools.exclusive.irqIsolation,
//     pools.shared.irqIsolation and pools.exclusive-non-isolcpus.irqIsolation).
//     Within one table row, list item or paragraph, the short forms
//     continue the last dotted key before them: `.leaf` names its sibling
//     (`allocation.fullPCPUsOnly`, `.hideHyperthreads`) and a bare `leaf`
//     its child (`power.classes.<name>`: `governor`, ...). A wildcard
//     (`dra.*`) or a parent alone (`dra`) documents nothing: each key has
//     to be named.
//
// Monitoring: every metric that the Prometheus rules, their promtool tests
// and the Grafana dashboards of deploy/monitoring name must be one the
// code exports (the metrics above, or the Go and process collectors' that
// the daemon registers): the daemon's own names (cpupool_*) wherever they
// appear, and every metric an expression (expr) or a test's series
// selects. A renamed metric would otherwise leave an alert that never
// fires.
//
// Links: every [text](target) and [label]: target outside code whose
// target has no URL scheme must name an existing file or directory,
// relative to the linking file (a leading / is the repository root). An
// #anchor into a Markdown file must be the slug of one of its headings (or
// an <a name|id> of it), by GitHub's rules: lower case, backticks and
// punctuation other than - and _ dropped, each space a -, and -1, -2, ...
// after repeated headings.
//
// Packages: the table under "## Packages" of docs/architecture.md must
// list every package of the module (a directory of non-test Go files), in
// a row of its own (`plugin/`) or by name in the row of the directory
// above it (`cli` in that of `cmd/nri-cpupool/`), and name no path that
// does not exist; the numbered list after "**Package floors.**" must put
// every package outside cmd/, tools/ and test/ on a floor, each import
// pointing to a floor below (packages.go).
//
// Problems are printed one a line, with what to do, and the exit status
// is 1; on success one summary line is printed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	var opts Options
	flag.StringVar(&opts.Root, "root", ".", "the repository root (go.mod, Makefile, the Go packages)")
	flag.StringVar(&opts.Docs, "docs", "docs", "the documentation directory, relative to -root unless absolute")
	flag.StringVar(&opts.Readme, "readme", "README.md", "the README whose links are checked too, relative to -root unless absolute (empty: none)")
	flag.StringVar(&opts.Architecture, "architecture", "architecture.md", "the page whose table must list every package and whose floors must follow the imports, relative to -docs unless absolute (empty: none)")
	flag.StringVar(&opts.Monitoring, "monitoring", "deploy/monitoring", "the Prometheus rules and Grafana dashboards, whose metrics must be the code's, relative to -root unless absolute (empty: none)")
	list := flag.Bool("list", false, "print the names read from the code, and check nothing")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "docscheck: unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	if *list {
		os.Exit(listNames(opts.Root, os.Stdout, os.Stderr))
	}
	os.Exit(run(opts, os.Stdout, os.Stderr))
}

// listNames prints every name docscheck reads from the code, a kind and a
// name a line.
func listNames(root string, stdout, stderr io.Writer) int {
	names, err := CodeNames(root)
	if err != nil {
		fmt.Fprintf(stderr, "docscheck: %v\n", err)
		return 1
	}
	for _, n := range names {
		fmt.Fprintf(stdout, "%-12s %-55s %s\n", n.Kind, n.Name, n.File)
	}
	return 0
}

// run checks and reports; it returns the exit status.
func run(opts Options, stdout, stderr io.Writer) int {
	res, err := Check(opts)
	if err != nil {
		fmt.Fprintf(stderr, "docscheck: %v\n", err)
		return 1
	}
	for _, p := range res.Problems {
		fmt.Fprintf(stderr, "docscheck: %s\n", p)
	}
	if len(res.Problems) > 0 {
		fmt.Fprintf(stderr, "docscheck: %d problems (%s)\n", len(res.Problems), res.Summary())
		return 1
	}
	fmt.Fprintf(stdout, "docscheck: ok: %s\n", res.Summary())
	return 0
}
