package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/cpupool/nri-cpupool/config"
)

// cliDir is the package that holds the command table.
const cliDir = "cmd/nri-cpupool/internal/cli"

// Options say what to check.
type Options struct {
	Root   string // the repository root
	Docs   string // the docs directory, relative to Root unless absolute
	Readme string // the README, relative to Root unless absolute; "" for none
	// Monitoring is the directory of the Prometheus rules and Grafana
	// dashboards, relative to Root unless absolute; "" for none. Every
	// metric they name must be one the code exports (monitoring.go).
	Monitoring string
	// Architecture is the page whose table must list every package of
	// the module and whose floors must follow its imports
	// (packages.go), relative to Docs unless absolute; "" for none.
	Architecture string
}

// Result is what Check found.
type Result struct {
	Problems []string
	// What was checked.
	ConfigKeys, Annotations, Metrics, EventReasons, Commands, Flags, MakeTargets, Links, Files int
	// MonitoringFiles are the rule, test and dashboard files checked.
	MonitoringFiles int
	// Packages are the module's packages checked against the
	// architecture page.
	Packages int
}

// Summary counts what was checked.
func (r Result) Summary() string {
	return fmt.Sprintf("%d config keys, %d annotations, %d metrics, %d pod Event reasons, %d commands with %d flags, %d make targets, %d links in %d files, the metrics of %d monitoring files, %d packages",
		r.ConfigKeys, r.Annotations, r.Metrics, r.EventReasons, r.Commands, r.Flags, r.MakeTargets, r.Links, r.Files, r.MonitoringFiles, r.Packages)
}

// docs is what the documentation names.
type docs struct {
	// code is the text of every code span and fenced block.
	code string
	// keyTokens are the dotted names in code spans, short forms resolved,
	// by their first segment.
	keyTokens map[string][]string
}

// Check reads the names from the code and the docs, and returns every
// problem. An error means the check could not run.
func Check(opts Options) (Result, error) {
	var res Result
	root := opts.Root
	if root == "" {
		root = "."
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	docsDir := abs(opts.Docs)
	docsName := strings.TrimSuffix(filepath.ToSlash(opts.Docs), "/") + "/"
	if st, err := os.Stat(docsDir); err != nil || !st.IsDir() {
		return res, fmt.Errorf("the documentation directory %s does not exist (%s): the config keys, annotations, metrics and commands must be documented in %s*.md; run from the repository root or pass -docs DIR", docsName, docsDir, docsName)
	}
	docFiles, err := markdownFiles(docsDir)
	if err != nil {
		return res, err
	}
	if len(docFiles) == 0 {
		return res, fmt.Errorf("%s holds no .md files", docsName)
	}
	load := markdownLoader()
	var mds []*mdFile
	for _, f := range docFiles {
		md, err := load(f)
		if err != nil {
			return res, err
		}
		mds = append(mds, md)
	}
	d := collectDocs(mds)

	code, err := readCode(root)
	if err != nil {
		return res, err
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	hint := func(page string) string { return docsName + page }

	res.ConfigKeys = len(code.keys)
	for _, k := range code.keys {
		if !d.documentsKey(k) {
			add("config key %s (%s) is not documented in %s: add it, in backticks, to %s", k, k.File, docsName, hint("configuration.md"))
		}
	}
	res.Annotations = len(code.annotations)
	for _, a := range code.annotations {
		if !containsWord(d.code, a.Name, annotationChar) {
			add("annotation %s (%s) is not documented in %s: add it, in backticks, to the page that describes it (%s, %s)", a.Name, a.File, docsName, hint("pools.md"), hint("placement.md"))
		}
	}
	problems = append(problems, code.metricProblems...)
	res.Metrics = len(code.metrics)
	for _, mt := range code.metrics {
		if !containsWord(d.code, mt.Name, metricChar) {
			add("metric %s (%s) is not documented in %s: add it, in backticks, to %s", mt.Name, mt.File, docsName, hint("metrics.md"))
		}
	}
	res.EventReasons = len(code.eventReasons)
	for _, r := range code.eventReasons {
		if !containsWord(d.code, r.Name, metricChar) {
			add("pod Event reason %s (%s) is not documented in %s: add it, in backticks, to the table of %s#pod-events", r.Name, r.File, docsName, hint("kubernetes.md"))
		}
	}
	res.Commands = len(code.commands)
	for _, c := range code.commands {
		res.Flags += len(c.Flags)
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_-])nri-cpupool[ \t]+` + regexp.QuoteMeta(c.Name) + `($|[^A-Za-z0-9_-])`)
		if !re.MatchString(d.code) {
			add("command nri-cpupool %s (%s) is not documented in %s: add `nri-cpupool %s ...`, in backticks, to %s", c.Name, c.File, docsName, c.Name, hint("commands.md"))
		}
		for _, f := range c.Flags {
			if !containsWord(d.code, "--"+f, flagChar) {
				add("flag --%s of nri-cpupool %s (%s) is not documented in %s: add `--%s`, in backticks, to %s", f, c.Name, c.File, docsName, f, hint("commands.md"))
			}
		}
	}
	res.MakeTargets = len(code.targets)
	for _, t := range code.targets {
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_-])make[ \t]+` + regexp.QuoteMeta(t) + `($|[^A-Za-z0-9_-])`)
		if !re.MatchString(d.code) {
			add("make target %s (Makefile .PHONY) is not documented in %s: add `make %s`, in backticks, to %s", t, docsName, t, hint("development.md"))
		}
	}

	if opts.Monitoring != "" {
		mp, n, err := CheckMonitoring(root, opts.Monitoring, code.metrics)
		if err != nil {
			return res, err
		}
		problems = append(problems, mp...)
		res.MonitoringFiles = n
	}

	if opts.Architecture != "" {
		page, pageName := opts.Architecture, filepath.ToSlash(opts.Architecture)
		if !filepath.IsAbs(page) {
			page, pageName = filepath.Join(docsDir, page), docsName+pageName
		}
		pp, err := CheckPackages(root, page, pageName, code.packages)
		if err != nil {
			return res, err
		}
		problems = append(problems, pp...)
		res.Packages = len(code.packages)
	}

	// Links.
	linkFiles := slices.Clone(docFiles)
	if opts.Readme != "" {
		readme := abs(opts.Readme)
		if _, err := os.Stat(readme); err != nil {
			add("%s does not exist: pass -readme \"\" to check no README", opts.Readme)
		} else {
			linkFiles = append([]string{readme}, linkFiles...)
		}
	}
	lp, n, err := CheckLinks(root, linkFiles, load)
	if err != nil {
		return res, err
	}
	problems = append(problems, lp...)
	res.Links, res.Files = n, len(linkFiles)
	res.Problems = problems
	return res, nil
}

// codeNames are the names the code defines.
type codeNames struct {
	keys                 []ConfigKey
	annotations, metrics []Name
	eventReasons         []Name
	// metricProblems are metric names that could not be read.
	metricProblems []string
	commands       []Command
	targets        []string
	// packages are the module's packages with the module's packages
	// each imports, by directory.
	packages map[string][]string
}

// readCode reads every kind of name from the code below root.
func readCode(root string) (*codeNames, error) {
	m, err := parseModule(root)
	if err != nil {
		return nil, err
	}
	var c codeNames
	ct := reflect.TypeFor[config.Config]()
	cfgDir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(ct.PkgPath(), m.modulePath+"/")))
	c.keys = ConfigKeys(ct, m.typeFiles(cfgDir))
	c.annotations = m.Annotations()
	c.metrics, c.metricProblems = m.Metrics()
	c.eventReasons = m.EventReasons()
	c.packages = m.packages()
	if c.commands, err = m.Commands(cliDir); err != nil {
		return nil, err
	}
	c.targets, err = MakeTargets(filepath.Join(root, "Makefile"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &c, nil
}

// KindName is a name the code defines, for -list.
type KindName struct{ Kind, Name, File string }

// CodeNames lists what readCode finds.
func CodeNames(root string) ([]KindName, error) {
	c, err := readCode(root)
	if err != nil {
		return nil, err
	}
	var out []KindName
	for _, k := range c.keys {
		out = append(out, KindName{"config", k.String(), k.File})
	}
	for _, a := range c.annotations {
		out = append(out, KindName{"annotation", a.Name, a.File})
	}
	for _, mt := range c.metrics {
		out = append(out, KindName{"metric", mt.Name, mt.File})
	}
	for _, r := range c.eventReasons {
		out = append(out, KindName{"event", r.Name, r.File})
	}
	for _, cmd := range c.commands {
		out = append(out, KindName{"command", "nri-cpupool " + cmd.Name, cmd.File})
		for _, f := range cmd.Flags {
			out = append(out, KindName{"flag", "nri-cpupool " + cmd.Name + " --" + f, cmd.File})
		}
	}
	for _, t := range c.targets {
		out = append(out, KindName{"make", "make " + t, "Makefile"})
	}
	return out, nil
}

// markdownLoader reads and parses Markdown files, each once.
func markdownLoader() func(string) (*mdFile, error) {
	parsed := map[string]*mdFile{}
	return func(path string) (*mdFile, error) {
		if md, ok := parsed[path]; ok {
			return md, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		md := parseMarkdown(string(b))
		parsed[path] = md
		return md, nil
	}
}

// CheckLinks checks the relative links of the Markdown files; it returns
// the problems and how many links it checked. load may be nil.
func CheckLinks(root string, files []string, load func(string) (*mdFile, error)) ([]string, int, error) {
	if load == nil {
		load = markdownLoader()
	}
	var problems []string
	n := 0
	for _, f := range files {
		md, err := load(f)
		if err != nil {
			return nil, 0, err
		}
		for _, l := range md.links {
			n++
			if p := checkLink(root, f, l, load); p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems, n, nil
}

// markdownFiles are the .md files below dir, sorted.
func markdownFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(strings.ToLower(path), ".md") {
			out = append(out, path)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// keyTokenRE is a run of the characters of a dotted key.
var keyTokenRE = regexp.MustCompile(`[A-Za-z0-9_.<>-]+`)

// collectDocs gathers the code text and the dotted names of the files,
// resolving the short forms within each unit: `.leaf` continues the
// parent of the last dotted name before it, a bare `leaf` its child.
func collectDocs(mds []*mdFile) docs {
	var code strings.Builder
	d := docs{keyTokens: map[string][]string{}}
	seen := map[string]bool{}
	add := func(tok string) {
		if !seen[tok] {
			seen[tok] = true
			first, _, _ := strings.Cut(tok, ".")
			d.keyTokens[first] = append(d.keyTokens[first], tok)
		}
	}
	for _, md := range mds {
		code.WriteString(md.code.String())
		code.WriteByte('\n')
		for _, spans := range md.spans {
			last := ""
			for _, sp := range spans {
				for _, tok := range keyTokenRE.FindAllString(sp.text, -1) {
					tok = strings.TrimRight(tok, ".")
					switch {
					case tok == "":
					case strings.HasPrefix(tok, "."):
						if i := strings.LastIndex(last, "."); i > 0 {
							last = last[:i] + tok
							add(last)
						}
					case strings.Contains(tok, "."):
						add(tok)
						last = tok
					default:
						add(tok)
						if last != "" {
							add(last + "." + tok)
						}
					}
				}
			}
		}
	}
	d.code = code.String()
	return d
}

var (
	placeholderRE = regexp.MustCompile(`^<[^<>]+>$`)
	segNameRE     = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// documentsKey tells whether a dotted name of the docs names k.
func (d docs) documentsKey(k ConfigKey) bool {
	for _, tok := range d.keyTokens[k.Segments[0].name] {
		if keyMatches(k, tok) {
			return true
		}
	}
	return false
}

// keyMatches tells whether the dotted name tok names k: segment by
// segment the same name, except that a map key may be a <placeholder> or
// any name, and a pool name may be a <placeholder>.
func keyMatches(k ConfigKey, tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != len(k.Segments) {
		return false
	}
	for i, s := range k.Segments {
		p := parts[i]
		switch s.kind {
		case segField:
			if p != s.name {
				return false
			}
		case segPool:
			if p != s.name && !placeholderRE.MatchString(p) {
				return false
			}
		case segMap:
			if !placeholderRE.MatchString(p) && !segNameRE.MatchString(p) {
				return false
			}
		}
	}
	return true
}

func annotationChar(c byte) bool { return metricChar(c) || c == '-' || c == '.' }
func metricChar(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
func flagChar(c byte) bool { return metricChar(c) || c == '-' }

// containsWord tells whether word occurs in s with no word character
// (by isWord) right before or after it.
func containsWord(s, word string, isWord func(byte) bool) bool {
	for i := 0; ; {
		k := strings.Index(s[i:], word)
		if k < 0 {
			return false
		}
		start, end := i+k, i+k+len(word)
		if (start == 0 || !isWord(s[start-1])) && (end == len(s) || !isWord(s[end]) || (s[end] == '.' && (end+1 == len(s) || !isWord(s[end+1])))) {
			return true
		}
		i = start + 1
	}
}

// checkLink checks one link of the file at path; it returns the problem,
// or "".
func checkLink(root, path string, l Link, load func(string) (*mdFile, error)) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
		return p
	}
	where := fmt.Sprintf("%s:%d: link %s", rel(path), l.Line, l.Target)
	target, anchor, _ := strings.Cut(l.Target, "#")
	target, _, _ = strings.Cut(target, "?")
	if t, err := url.PathUnescape(target); err == nil {
		target = t
	}
	if a, err := url.PathUnescape(anchor); err == nil {
		anchor = a
	}
	dest := path
	switch {
	case target == "":
	case strings.HasPrefix(target, "/"):
		dest = filepath.Join(root, filepath.FromSlash(target))
	default:
		dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
	}
	st, err := os.Stat(dest)
	if err != nil {
		return fmt.Sprintf("%s: %s does not exist: fix the path (it is relative to %s)", where, rel(dest), rel(filepath.Dir(path))+"/")
	}
	if anchor == "" || st.IsDir() || !strings.HasSuffix(strings.ToLower(dest), ".md") {
		return ""
	}
	md, err := load(dest)
	if err != nil {
		return fmt.Sprintf("%s: %v", where, err)
	}
	if md.anchors[anchor] {
		return ""
	}
	msg := fmt.Sprintf("%s: no heading %q in %s", where, anchor, rel(dest))
	if best := closest(anchor, md.anchors); best != "" {
		msg += fmt.Sprintf(": did you mean #%s?", best)
	} else {
		msg += ": link to one of its headings' anchors (lower case, spaces as -, punctuation dropped)"
	}
	return msg
}

// closest is the anchor nearest to a by edit distance, if near enough.
func closest(a string, anchors map[string]bool) string {
	best, bestD := "", len(a)/3+2
	for _, c := range slices.Sorted(maps.Keys(anchors)) {
		if dist := config.EditDistance(a, c); dist < bestD {
			best, bestD = c, dist
		}
	}
	return best
}
