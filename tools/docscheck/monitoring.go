package main

// The monitoring files (deploy/monitoring: Prometheus rules, their promtool
// tests, Grafana dashboards) must name only metrics the daemon exports: an
// alert on a metric that was renamed never fires, and says nothing.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"gopkg.in/yaml.v3"
)

// standardMetrics are the metrics of the client library's Go and process
// collectors, which the daemon registers beside its own (plugin.Registry,
// with the same options), read from the collectors themselves; and up,
// which Prometheus records of every scrape.
func standardMetrics() ([]string, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mfs, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering the Go and process collectors' metrics: %w", err)
	}
	names := []string{"up"}
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names, nil
}

// metricSuffixes are the series a histogram or summary adds to its name.
var metricSuffixes = []string{"_bucket", "_sum", "_count"}

// knownMetric tells whether name is a series of an exported metric.
func knownMetric(name string, exported map[string]bool) bool {
	if exported[name] {
		return true
	}
	for _, s := range metricSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok && exported[base] {
			return true
		}
	}
	return false
}

// ownMetric matches the daemon's metric names anywhere in a file: in an
// expression, a test's series, an alert's description, a dashboard's
// variable query.
var ownMetric = regexp.MustCompile(`\bcpupool_[A-Za-z0-9_]+`)

// CheckMonitoring reads every .yaml, .yml and .json file below dir and
// returns a problem for each metric one names that is not in exported
// (names the code defines, and standardMetrics): the daemon's own names
// (cpupool_*) wherever they appear, and every metric an expression (a
// rule's or a panel's expr) or a rule test's series selects. It returns the
// number of files read.
func CheckMonitoring(root, dir string, code []Name) (problems []string, files int, err error) {
	exported := map[string]bool{}
	for _, n := range code {
		exported[n.Name] = true
	}
	standard, err := standardMetrics()
	if err != nil {
		return nil, 0, err
	}
	for _, n := range standard {
		exported[n] = true
	}
	abs := dir
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(root, dir)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, 0, fmt.Errorf("the monitoring directory %s: %w (pass -monitoring \"\" to check none)", dir, err)
	}
	err = filepath.WalkDir(abs, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		files++
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			problems = append(problems, fmt.Sprintf("%s: cannot parse it: %v", rel(root, path), err))
			return nil
		}
		seen := map[string]bool{}
		report := func(line int, name, where string) {
			if knownMetric(name, exported) || seen[name] {
				return
			}
			seen[name] = true
			problems = append(problems, fmt.Sprintf("%s:%d: %s names metric %s, which nri-cpupool does not export (`go run ./tools/docscheck -list` shows those it does): rename it to an exported metric or remove it",
				rel(root, path), line, where, name))
		}
		walkScalars(&doc, "", func(key string, n *yaml.Node) {
			switch key {
			case "expr":
				for _, m := range PromQLMetrics(n.Value) {
					report(n.Line, m, "an expression")
				}
			case "series":
				name, _, _ := strings.Cut(n.Value, "{")
				report(n.Line, strings.TrimSpace(name), "a test series")
			}
			for _, m := range ownMetric.FindAllString(n.Value, -1) {
				report(n.Line, m, "the text")
			}
		})
		return nil
	})
	return problems, files, err
}

// rel is path relative to root, for messages.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}

// walkScalars calls f with every scalar of n and the mapping key it is the
// value of ("" in a sequence or at the top).
func walkScalars(n *yaml.Node, key string, f func(key string, n *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			walkScalars(c, key, f)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkScalars(n.Content[i+1], n.Content[i].Value, f)
		}
	case yaml.ScalarNode:
		f(key, n)
	}
}

// promqlWords are PromQL's keywords and aggregation operators, which are
// not metrics where they are not followed by "(" (sum by (x) (...)).
var promqlWords = []string{
	"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
	"limitk", "limit_ratio",
}

// promqlGrouping are the modifiers whose parenthesised list names labels.
var promqlGrouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// PromQLMetrics are the metric names a PromQL expression selects: its
// identifiers outside strings, label matchers ({...}), ranges ([...]) and
// grouping lists (by (...)), that are not a function (followed by "("), a
// keyword or a Grafana variable ($x). A name in a matcher
// ({__name__="x"}) is not seen here; the cpupool_ scan of the text sees
// the daemon's own.
func PromQLMetrics(expr string) []string {
	s := []byte(expr)
	var names []string
	skipTo := func(i int, close byte) int {
		for i < len(s) && s[i] != close {
			i++
		}
		return i + 1
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			i++
		case c == '{':
			i = skipToOutsideStrings(s, i, '}')
		case c == '[':
			i = skipTo(i, ']')
		case c == '#': // a comment, to the line's end
			i = skipTo(i, '\n')
		case c == '$':
			i++
			if i < len(s) && s[i] == '{' {
				i = skipTo(i, '}')
			}
			for i < len(s) && identChar(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (identChar(s[i]) || s[i] == '.') {
				i++
			}
		case identStart(c):
			j := i
			for j < len(s) && identChar(s[j]) {
				j++
			}
			word := string(s[i:j])
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r') {
				k++
			}
			switch {
			case slices.Contains(promqlGrouping, word):
				if k < len(s) && s[k] == '(' {
					j = skipTo(k, ')')
				}
			case k < len(s) && s[k] == '(': // a function
			case slices.Contains(promqlWords, strings.ToLower(word)):
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

// skipToOutsideStrings returns the index after the close that ends the
// block opened at s[i], skipping quoted strings (a matcher's value may
// hold a brace).
func skipToOutsideStrings(s []byte, i int, close byte) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '"', '\'', '`':
			q := s[i]
			for i++; i < len(s) && s[i] != q; i++ {
				if s[i] == '\\' && q != '`' {
					i++
				}
			}
		case close:
			return i + 1
		}
	}
	return i
}

func identStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func identChar(c byte) bool { return identStart(c) || c >= '0' && c <= '9' }
