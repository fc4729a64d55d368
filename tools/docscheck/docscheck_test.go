package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/config"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"IRQ isolation", "irq-isolation"},
		{"`--map`", "--map"},
		{"`topology --json`", "topology---json"},
		{"`simulate` requests file", "simulate-requests-file"},
		{"What's new? (v2.0)", "whats-new-v20"},
		{"snake_case and kebab-case", "snake_case-and-kebab-case"},
		{"[Linked](other.md) heading", "linked-heading"},
		{"Größe <em>und</em> Ünïcode", "größe-und-ünïcode"},
		{"CPU quota on exclusive CPUs", "cpu-quota-on-exclusive-cpus"},
	} {
		if got := Slug(headingText(tc.heading)); got != tc.want {
			t.Errorf("slug of %q = %q, want %q", tc.heading, got, tc.want)
		}
	}
	s := slugger{}
	var got []string
	for _, h := range []string{"Tests", "Tests", "Tests", "Tests 1", "Other"} {
		got = append(got, s.slug(h))
	}
	if want := []string{"tests", "tests-1", "tests-2", "tests-1-1", "other"}; !slices.Equal(got, want) {
		t.Errorf("repeated headings: %q, want %q", got, want)
	}
}

func TestCodeSpans(t *testing.T) {
	in := "a `b` c ``d ` e`` f \\`x and `` `y` `` `open"
	spans, rest := codeSpans(in)
	var texts []string
	for _, sp := range spans {
		texts = append(texts, sp.text)
	}
	// \` is no delimiter; one leading and trailing space is stripped; a
	// run without its closing run is text.
	if want := []string{"b", "d ` e", "`y`"}; !slices.Equal(texts, want) {
		t.Errorf("spans %q, want %q", texts, want)
	}
	if len(rest) != len(in) || strings.Contains(rest, "b") || strings.Contains(rest, "y") || !strings.Contains(rest, "f \\`x and ") ||
		!strings.HasSuffix(rest, " `open") {
		t.Errorf("rest %q: the spans are not blanked out alone", rest)
	}
	spans, _ = codeSpans("see `pools.<pool>.irqIsolation` and\n`a\nb`")
	if len(spans) != 2 || spans[0].text != "pools.<pool>.irqIsolation" || spans[1].text != "a b" || spans[1].line != 1 {
		t.Errorf("spans %+v", spans)
	}
}

func TestParseMarkdown(t *testing.T) {
	md := parseMarkdown(strings.Join([]string{
		"# Title",
		"",
		"Text with a [link](a.md#x) and `code [not](b.md)`.",
		"",
		"```yaml",
		"# not a heading",
		"[not a link](c.md)",
		"pool.cpupool.dev: exclusive",
		"```",
		"",
		"Setext heading",
		"--------------",
		"",
		"| `key` | [row](d.md) |",
		"- item [one](e.md)",
		"[ref]: f.md",
		"[web](https://example.com) <a name=\"custom\"></a>",
		"## Title",
	}, "\n"))
	for _, a := range []string{"title", "setext-heading", "title-1", "custom"} {
		if !md.anchors[a] {
			t.Errorf("anchor %q missing from %v", a, md.anchors)
		}
	}
	if md.anchors["not-a-heading"] {
		t.Error("a # line in a fenced block counted as a heading")
	}
	var links []string
	for _, l := range md.links {
		links = append(links, l.Target)
	}
	if want := []string{"a.md#x", "d.md", "e.md", "f.md"}; !slices.Equal(links, want) {
		t.Errorf("links %q, want %q", links, want)
	}
	if md.links[1].Line != 14 {
		t.Errorf("d.md's line %d, want 14", md.links[1].Line)
	}
	if code := md.code.String(); !strings.Contains(code, "pool.cpupool.dev: exclusive") || !strings.Contains(code, "key") {
		t.Errorf("code text %q lacks the fenced block or a span", code)
	}
}

func TestCheckLinks(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "README.md"), strings.Join([]string{
		"# Top",
		"See [tuning](docs/tuning.md#irq-isolation), [typo](docs/tuning.md#irq-isolatoin),",
		"[gone](docs/missing.md), [here](#top), [nowhere](#nowhere), [web](https://example.com/x#y),",
		"[mail](mailto:a@b.c), [dir](docs/), [src](main.go#L3), [esc](docs/with%20space.md).",
		"```",
		"[in a fence](docs/absent.md)",
		"```",
		"`[in a span](docs/absent.md)`",
	}, "\n"))
	write(t, filepath.Join(root, "docs", "tuning.md"), "# Tuning\n\n## IRQ isolation\n\n## IRQ isolation\n\nBack to [the top](../README.md#top) and [the second](#irq-isolation-1) and [root](/README.md).\n")
	write(t, filepath.Join(root, "docs", "with space.md"), "# x\n")
	write(t, filepath.Join(root, "main.go"), "package main\n")
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "docs", "tuning.md"), filepath.Join(root, "docs", "with space.md")}
	problems, n, err := CheckLinks(root, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`README.md:2: link docs/tuning.md#irq-isolatoin: no heading "irq-isolatoin" in docs/tuning.md: did you mean #irq-isolation?`,
		`README.md:3: link docs/missing.md: docs/missing.md does not exist: fix the path (it is relative to ./)`,
		`README.md:3: link #nowhere: no heading "nowhere" in README.md: link to one of its headings' anchors (lower case, spaces as -, punctuation dropped)`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if n != 11 {
		t.Errorf("%d links checked, want 11 (web and mail links and code are skipped)", n)
	}
}

func keyStrings(keys []ConfigKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.String())
	}
	return out
}

func TestConfigKeysOfTheConfig(t *testing.T) {
	m, err := parseModule(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	keys := ConfigKeys(reflect.TypeFor[config.Config](), m.typeFiles(filepath.Join(repoRoot, "config")))
	got := keyStrings(keys)
	for _, want := range []string{"dra.enabled", "pools.exclusive.count", "pools.exclusive-non-isolcpus.minInfraCPUs", "allocation.fullPCPUsOnly",
		"irq.rescanInterval", "power.unsupported", "power.classes.<name>.governor", "power.pools.infra.class", "allowedNamespaces.<name>", "metricsAddress"} {
		if !slices.Contains(got, want) {
			t.Errorf("key %s missing from %q", want, got)
		}
	}
	for _, notWant := range []string{"pools", "irq.rescanInterval.Duration", "irq.rescanInterval.duration", "power.classes.<name>"} {
		if slices.Contains(got, notWant) {
			t.Errorf("%s is not a leaf key", notWant)
		}
	}
	for _, k := range keys {
		if k.String() == "power.unsupported" && k.File != "config/power.go" {
			t.Errorf("power.unsupported is in %q, want config/power.go", k.File)
		}
		if k.String() == "dra.enabled" && k.File != "config/config.go" {
			t.Errorf("dra.enabled is in %q, want config/config.go", k.File)
		}
	}
}

type selfDecoding struct{ A, B int }

func (*selfDecoding) UnmarshalYAML(*yaml.Node) error { return nil }

func TestConfigKeysWalk(t *testing.T) {
	type inner struct {
		Leaf string `yaml:"leaf"`
	}
	type common struct {
		Shared int `yaml:"shared"`
	}
	type cfg struct {
		common   `yaml:",inline"`
		Plain    int                 `yaml:"plain"`
		Skipped  int                 `yaml:"-"`
		Untagged bool                // yaml.v3: "untagged"
		Ptr      *inner              `yaml:"ptr"`
		ByName   map[string]inner    `yaml:"byName"`
		Lists    map[string][]string `yaml:"lists"`
		Pools    struct {
			Exclusive inner `yaml:"exclusive"`
		} `yaml:"pools"`
		Dur    config.Duration `yaml:"dur"`
		Custom selfDecoding    `yaml:"custom"`
		Items  []inner         `yaml:"items"`
		hidden int
	}
	_ = cfg{}.hidden
	keys := ConfigKeys(reflect.TypeFor[cfg](), nil)
	want := []string{"shared", "plain", "untagged", "ptr.leaf", "byName.<name>.leaf", "lists.<name>", "pools.exclusive.leaf", "dur", "custom", "items.leaf"}
	if got := keyStrings(keys); !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	for _, k := range keys {
		if k.String() == "pools.exclusive.leaf" && k.Segments[1].kind != segPool {
			t.Errorf("pools.exclusive: segment kind %v, want a pool", k.Segments[1].kind)
		}
		if k.String() == "byName.<name>.leaf" && k.Segments[1].kind != segMap {
			t.Errorf("byName.<name>: segment kind %v, want a map key", k.Segments[1].kind)
		}
	}
}

// docsOf reads Markdown as the docs.
func docsOf(texts ...string) docs {
	var mds []*mdFile
	for _, t := range texts {
		mds = append(mds, parseMarkdown(t))
	}
	return collectDocs(mds)
}

func TestDocumentedKeyForms(t *testing.T) {
	m, err := parseModule(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]ConfigKey{}
	for _, k := range ConfigKeys(reflect.TypeFor[config.Config](), m.typeFiles(filepath.Join(repoRoot, "config"))) {
		keys[k.String()] = k
	}
	d := docsOf(strings.Join([]string{
		"| key | default | meaning |",
		"|---|---|---|",
		"| `pools.exclusive.cpus` / `.count` | all | sizes |",
		"| `pools.<pool>.irqIsolation` | `off` | IRQs |",
		"| `allocation.fullPCPUsOnly`, `.hideHyperthreads` | `false` | placement |",
		"| `allowedNamespaces.<pool>` | open | namespaces |",
		"| `power.classes.<name>` | none | a class: `governor`, `minFreqKHz` |",
		"| `power.pools.exclusive.idleClass` | none | idle |",
		"| `dra.*` | off | the DRA driver |",
		"| `irq` | | `rescanInterval`: a bare parent starts no short forms |",
		"",
		"With `dra.devices: cpu` the node publishes CPUs.",
		"",
		"```yaml",
		"dra:",
		"  nodeName: x",
		"power:",
		"  unsupported: warn",
		"```",
		"",
		"`kubelet.devicePlugin` is described here, and on the next row:",
		"",
		"| `.devicePluginDir` | no key before it on this row |",
	}, "\n"))
	for key, want := range map[string]bool{
		"pools.exclusive.cpus":                      true,
		"pools.exclusive.count":                     true,
		"pools.shared.count":                        false,
		"pools.exclusive.irqIsolation":              true,
		"pools.exclusive-non-isolcpus.irqIsolation": true,
		"allocation.fullPCPUsOnly":                  true,
		"allocation.hideHyperthreads":               true,
		"allocation.distributeAcrossNUMA":           false,
		"allowedNamespaces.<name>":                  true,
		"power.classes.<name>.governor":             true,
		"power.classes.<name>.minFreqKHz":           true,
		"power.classes.<name>.maxFreqKHz":           false,
		"power.pools.exclusive.idleClass":           true,
		"power.pools.shared.idleClass":              false,
		"dra.enabled":                               false, // dra.* is no key
		"dra.devices":                               true,
		"dra.nodeName":                              false, // YAML examples document nothing
		"power.unsupported":                         false,
		"irq.rescanInterval":                        false, // `irq` is no dotted key
		"kubelet.devicePlugin":                      true,
		"kubelet.devicePluginDir":                   false,
	} {
		k, ok := keys[key]
		if !ok {
			t.Fatalf("no config key %s", key)
		}
		if got := d.documentsKey(k); got != want {
			t.Errorf("%s documented: %v, want %v", key, got, want)
		}
	}
}

func TestAnnotationsAndMetricsOfTheModule(t *testing.T) {
	m, err := parseModule(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	anns := m.Annotations()
	var names []string
	for _, a := range anns {
		names = append(names, a.Name)
		if a.Name == "pool.cpupool.dev" && a.File != "allocator/annotationkey.go" {
			t.Errorf("pool.cpupool.dev is in %q", a.File)
		}
	}
	for _, want := range []string{"pool.cpupool.dev", "numa.cpupool.dev", "shared-cpus.cpupool.dev"} {
		if !slices.Contains(names, want) {
			t.Errorf("annotation %s missing from %q", want, names)
		}
	}
	if slices.Contains(names, "cpupool.dev") {
		t.Error("the domain itself is no annotation key")
	}
	metrics, problems := m.Metrics()
	if len(problems) > 0 {
		t.Errorf("problems: %q", problems)
	}
	names = nil
	for _, mt := range metrics {
		names = append(names, mt.Name)
	}
	for _, want := range []string{"cpupool_refused_containers_total", "cpupool_pool_cpus", "cpupool_state_write_duration_seconds", "cpupool_handler_duration_seconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s missing from %q", want, names)
		}
	}
}

func TestMetricsAndAnnotationsFromSource(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module example.com/m\n")
	write(t, filepath.Join(root, "a", "a.go"), `package a

import prom "github.com/prometheus/client_golang/prometheus"

const prefix = "cpupool_"
const AnnotationX = "x-y.cpupool.dev"
const notAnnotation = "cpupool.dev/exclusive"

var name = "dynamic"

var (
	_ = prom.NewDesc("cpupool_literal", "help", nil, nil)
	_ = prom.NewDesc(prefix+"constant", "help", nil, nil)
	_ = prom.NewCounter(prom.CounterOpts{Namespace: "cpupool", Subsystem: "sub", Name: "composed_total"})
	_ = prom.NewDesc(name, "help", nil, nil)
)
`)
	write(t, filepath.Join(root, "a", "a_test.go"), `package a

import "github.com/prometheus/client_golang/prometheus"

const AnnotationTest = "test.cpupool.dev"

var _ = prometheus.NewDesc("cpupool_in_a_test", "help", nil, nil)
`)
	write(t, filepath.Join(root, "b", "testdata", "t.go"), "package t\n\nconst A = \"fixture.cpupool.dev\"\n")
	m, err := parseModule(root)
	if err != nil {
		t.Fatal(err)
	}
	metrics, problems := m.Metrics()
	var names []string
	for _, mt := range metrics {
		names = append(names, mt.Name)
	}
	if want := []string{"cpupool_constant", "cpupool_literal", "cpupool_sub_composed_total"}; !slices.Equal(names, want) {
		t.Errorf("metrics %q, want %q", names, want)
	}
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "a/a.go:15: cannot read the metric name") {
		t.Errorf("problems %q, want one for a/a.go:15", problems)
	}
	anns := m.Annotations()
	if len(anns) != 1 || anns[0] != (Name{"x-y.cpupool.dev", "a/a.go"}) {
		t.Errorf("annotations %+v, want x-y.cpupool.dev only", anns)
	}
}

func TestCommandsOfTheCLI(t *testing.T) {
	m, err := parseModule(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := m.Commands(cliDir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Command{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	for _, want := range []string{"run", "topology", "validate", "simulate", "status", "audit", "version"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("command %s missing from %+v", want, cmds)
		}
	}
	status := byName["status"]
	for _, f := range []string{"json", "map", "color", "state-file", "sysfs-root"} {
		if !slices.Contains(status.Flags, f) {
			t.Errorf("status flag %s missing from %q", f, status.Flags)
		}
	}
	if status.File != cliDir+"/status.go" {
		t.Errorf("status is in %q", status.File)
	}
}

func TestCommandsFromSource(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module example.com/m\n")
	write(t, filepath.Join(root, cliDir, "cli.go"), `package cli

import "flag"

type command struct {
	name string
	run  func(args []string) error
}

var table = []command{
	{"plain", runPlain},
	{run: runKeyed, name: "keyed"},
}

func runPlain(args []string) error {
	fs := flag.NewFlagSet("plain", flag.ContinueOnError)
	_ = fs.Bool("json", false, "JSON")
	var n int
	fs.IntVar(&n, "count", 1, "how many")
	commonFlags(fs)
	return fs.Parse(args)
}

func commonFlags(fs *flag.FlagSet) { fs.String("sysfs-root", "", "root") }

func runKeyed(args []string) error { return nil }
`)
	m, err := parseModule(root)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := m.Commands(cliDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{Name: "plain", File: cliDir + "/cli.go", Flags: []string{"count", "json", "sysfs-root"}},
		{Name: "keyed", File: cliDir + "/cli.go"},
	}
	if !reflect.DeepEqual(cmds, want) {
		t.Errorf("commands %+v, want %+v", cmds, want)
	}
}

func TestMakeTargets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Makefile")
	write(t, path, "GO ?= go\nX := a:b\n.PHONY: all build \\\n  test\n\nall: build\n\nbuild:\n\tgo build\ntest: build\n")
	got, err := MakeTargets(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"build", "test"}; !slices.Equal(got, want) {
		t.Errorf("targets %q, want %q (all, the default goal, left out)", got, want)
	}
}

// fullDocs is a page that names everything the code defines but skip.
func fullDocs(t *testing.T, skip ...string) string {
	t.Helper()
	names, err := CodeNames(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# Everything\n\n")
	for _, n := range names {
		if !slices.Contains(skip, n.Name) {
			b.WriteString("- `" + n.Name + "`\n")
		}
	}
	return b.String()
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "all.md"), fullDocs(t)+"\nSee [the top](#everything).\n")
	res, err := Check(Options{Root: repoRoot, Docs: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		t.Errorf("problems with every name documented:\n%s", strings.Join(res.Problems, "\n"))
	}
	if res.ConfigKeys < 50 || res.Annotations < 10 || res.Metrics < 20 || res.EventReasons < 10 || res.Commands < 7 || res.Flags < 20 || res.Links < 1 || res.Files != 1 {
		t.Errorf("checked too little: %s", res.Summary())
	}
}

func TestCheckReportsWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sub", "all.md"), fullDocs(t, "power.unsupported", "cpupool_refused_containers_total", "pool.cpupool.dev",
		"nri-cpupool audit --sample", "make lint", "CPUPoolResizeRefused")+"\n[broken](../nowhere.md)\n")
	res, err := Check(Options{Root: repoRoot, Docs: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"config key power.unsupported (config/power.go) is not documented in " + dir + "/: add it, in backticks, to " + dir + "/configuration.md",
		"annotation pool.cpupool.dev (allocator/annotationkey.go) is not documented in " + dir + "/",
		"metric cpupool_refused_containers_total (plugin/metrics.go) is not documented in " + dir + "/: add it, in backticks, to " + dir + "/metrics.md",
		"flag --sample of nri-cpupool audit (" + cliDir + "/audit.go) is not documented in " + dir + "/",
		"make target lint (Makefile .PHONY) is not documented in " + dir + "/",
		"pod Event reason CPUPoolResizeRefused (plugin/podevents.go) is not documented in " + dir + "/: add it, in backticks, to the table of " + dir + "/kubernetes.md#pod-events",
		"link ../nowhere.md: " + filepath.Join(dir, "nowhere.md") + " does not exist",
	}
	if len(res.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(res.Problems), len(want), strings.Join(res.Problems, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(res.Problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(res.Problems, "\n"))
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(Options{Root: repoRoot, Docs: dir}, &stdout, &stderr); code != 1 || stdout.Len() > 0 ||
		!strings.HasPrefix(stderr.String(), "docscheck: config key power.unsupported") {
		t.Errorf("run: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestCheckWithoutDocs(t *testing.T) {
	_, err := Check(Options{Root: repoRoot, Docs: filepath.Join(t.TempDir(), "docs")})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("err %v, want the docs directory reported missing", err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(Options{Root: repoRoot, Docs: t.TempDir()}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no .md files") {
		t.Errorf("run on an empty docs directory: exit %d, stderr %q", code, stderr.String())
	}
}

func TestPromQLMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`cpupool_runtime_connected == 0`, []string{"cpupool_runtime_connected"}},
		{`sum by (instance, reason) (increase(cpupool_refused_containers_total{reason=~"placement|power"}[10m])) > 0
		  or sum by (instance, reason) (cpupool_refused_containers_total unless cpupool_refused_containers_total offset 10m) > 0`,
			[]string{"cpupool_refused_containers_total", "cpupool_refused_containers_total", "cpupool_refused_containers_total"}},
		{`histogram_quantile(0.99, sum(rate(cpupool_handler_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])) by (le, handler))`,
			[]string{"cpupool_handler_duration_seconds_bucket"}},
		{`time() - cpupool_audit_timestamp_seconds > 300`, []string{"cpupool_audit_timestamp_seconds"}},
		{`max without (state) (x{a="}{", b='['}) * on (node) group_left (pool) y / ignoring(z) 1e3 # cpupool_not_here`,
			[]string{"x", "y"}},
		{`topk(5, cpupool_exclusive_cpu_device_irqs) and bool process_resident_memory_bytes @ start()`,
			[]string{"cpupool_exclusive_cpu_device_irqs", "process_resident_memory_bytes"}},
		{`label_replace(up, "dst", "$1", "src", "(.*)")`, []string{"up"}},
	} {
		if got := PromQLMetrics(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("PromQLMetrics(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestShippedMonitoringNamesExportedMetrics: deploy/monitoring's rules,
// their tests and the dashboard name only metrics the daemon exports.
func TestShippedMonitoringNamesExportedMetrics(t *testing.T) {
	c, err := readCode(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	problems, files, err := CheckMonitoring(repoRoot, "deploy/monitoring", c.metrics)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("problems:\n%s", strings.Join(problems, "\n"))
	}
	if files < 3 {
		t.Errorf("%d files checked, want the rules, their tests and the dashboard", files)
	}
}

// TestCheckFailsOnAnUnknownMetric: a rule, a rule test's series or a
// dashboard panel that names a metric the code does not export (a typo,
// a renamed metric) fails the check, naming the file, the line and the
// metric (issue 43, item 5); the Go and process collectors' metrics and
// up are exported.
func TestCheckFailsOnAnUnknownMetric(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "all.md"), fullDocs(t))
	mon := filepath.Join(dir, "monitoring")
	write(t, filepath.Join(mon, "rules.yaml"), `groups:
  - name: x
    rules:
      - alert: Refused
        expr: increase(cpupool_refused_container_total[5m]) > 0
        annotations:
          description: see cpupool_state_write_failing and cpupool_gone
      - alert: Fine
        expr: cpupool_runtime_connected == 0 or up == 0 or process_resident_memory_bytes > 1e9
`)
	write(t, filepath.Join(mon, "rules.test.yaml"), `tests:
  - input_series:
      - series: 'cpupool_held_cpu{pool="exclusive"}'
        values: '1'
      - series: 'cpupool_handler_duration_seconds_bucket{le="+Inf"}'
        values: '1'
`)
	write(t, filepath.Join(mon, "dashboard.json"), `{"panels": [{"targets": [{"expr": "sum(rate(go_gc_duration_seconds_count[5m])) + nope_metric"}]}]}`)
	write(t, filepath.Join(mon, "notes.txt"), "cpupool_not_checked")
	res, err := Check(Options{Root: repoRoot, Docs: dir, Monitoring: mon})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"rules.yaml:5: an expression names metric cpupool_refused_container_total, which nri-cpupool does not export",
		"rules.yaml:7: the text names metric cpupool_gone,",
		"rules.test.yaml:3: a test series names metric cpupool_held_cpu,",
		"dashboard.json:1: an expression names metric nope_metric,",
	}
	if len(res.Problems) != len(want) || res.MonitoringFiles != 3 {
		t.Errorf("%d problems in %d files, want %d in 3:\n%s", len(res.Problems), res.MonitoringFiles, len(want), strings.Join(res.Problems, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(res.Problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(res.Problems, "\n"))
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(Options{Root: repoRoot, Docs: dir, Monitoring: mon}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "cpupool_refused_container_total") {
		t.Errorf("run: exit %d, stderr %q", code, stderr.String())
	}
	if _, err := Check(Options{Root: repoRoot, Docs: dir, Monitoring: filepath.Join(dir, "none")}); err == nil || !strings.Contains(err.Error(), "-monitoring") {
		t.Errorf("a missing monitoring directory: %v", err)
	}
}

// archPage is an architecture page of a module of five packages.
const archPage = `# Architecture

## Packages

| path | contents |
|---|---|
| ` + "`cmd/app/`" + ` | the command, and in its ` + "`internal/`" + `: ` + "`cli`" + ` |
| ` + "`api/`" + ` | the API |
| ` + "`store/`" + ` | the store |
| ` + "`gone/`" + ` | a package since removed |

**Package floors.** Every import points down:

1. ` + "`cmd/app`" + `: nothing imports it.
2. ` + "`api`" + `, over ` + "`store`" + `.
3. ` + "`store`" + `.

## Next
`

func TestCheckPackages(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"cmd/app/internal/cli", "cmd/app/internal/run", "api", "store", "cache", "util"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	page := filepath.Join(root, "architecture.md")
	write(t, page, archPage)
	pkgs := map[string][]string{
		"cmd/app": {"cmd/app/internal/cli"}, "cmd/app/internal/cli": {"api"}, "cmd/app/internal/run": {"api"},
		"api": {"store"}, "store": {"util"}, "util": {"api"}, "cache": nil,
	}
	problems, err := CheckPackages(root, page, "arch.md", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"arch.md#packages lists `gone/`, which does not exist",
		"package cache is not in the table of arch.md#packages: add a row `cache/`",
		"package cmd/app/internal/run is not in the table of arch.md#packages: name `run`, in backticks, with what it is (its package comment) in the row of `cmd/app/`",
		"package util is not in the table of arch.md#packages",
		"package cache is on no floor of arch.md",
		"package util is on no floor of arch.md",
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem %q in:\n%s", w, strings.Join(problems, "\n"))
		}
	}

	// Every package listed and on a floor; one import pointing up.
	fixed := strings.Replace(archPage, "| `gone/` | a package since removed |", "| `cache/` | the cache |\n| `util/` | helpers |\n| `./` | the root |", 1)
	fixed = strings.Replace(fixed, "`cli` |", "`cli`, `run` |", 1)
	fixed = strings.Replace(fixed, "3. `store`.", "3. `store`, `cache`.\n4. `util`, and the root `./`.", 1)
	write(t, page, fixed)
	pkgs["."] = nil
	problems, err = CheckPackages(root, page, "arch.md", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"package util (floor 4 of arch.md) imports api (floor 2): every import points to a floor below (a higher number); move one of them"}; !slices.Equal(problems, want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
	delete(pkgs, "util")
	pkgs["store"] = nil
	if problems, err := CheckPackages(root, page, "arch.md", pkgs); err != nil || len(problems) > 0 {
		t.Errorf("a page that lists every package, each import pointing down: %v %q", err, problems)
	}

	write(t, page, "# Architecture\n")
	if _, err := CheckPackages(root, page, "arch.md", pkgs); err == nil || !strings.Contains(err.Error(), `no heading "## Packages"`) {
		t.Errorf("a page without the table: err %v", err)
	}
}

// TestShippedArchitectureListsEveryPackage: docs/architecture.md lists
// every package of the module, each on a floor below those that import
// it; a package added without its row fails here (and in make lint).
func TestShippedArchitectureListsEveryPackage(t *testing.T) {
	res, err := Check(Options{Root: repoRoot, Docs: "docs", Architecture: "architecture.md"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		if strings.Contains(p, "package") {
			t.Error(p)
		}
	}
	if res.Packages < 40 {
		t.Errorf("checked %d packages; the module has more than 40", res.Packages)
	}
}

// TestCheckReportsAPackageMissingFromTheArchitecture: a page without a
// package's row (kubeevents) fails Check, with what to add.
func TestCheckReportsAPackageMissingFromTheArchitecture(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "| `kubeevents/` |") {
			kept = append(kept, l)
		}
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "architecture.md"), strings.Join(kept, "\n"))
	res, err := Check(Options{Root: repoRoot, Docs: dir, Architecture: "architecture.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := "package kubeevents is not in the table of " + dir + "/architecture.md#packages: add a row `kubeevents/`"
	if !slices.ContainsFunc(res.Problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
		t.Errorf("no problem %q in:\n%s", want, strings.Join(res.Problems, "\n"))
	}
}
