package main

// The package map of docs/architecture.md: its table of packages must list
// every package of the module, and its list of floors must put every
// package below those that import it, so that neither drifts from the
// code when a package is added or an import changes.

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// apart are the directories whose packages the architecture page keeps
// out of the floors: the commands (one floor of their own, named by their
// last element) and the tools and suites that nothing imports.
var apart = []string{"cmd", "tools", "test"}

// isApart tells whether the package in dir is one of apart's.
func isApart(dir string) bool {
	first, _, _ := strings.Cut(dir, "/")
	return slices.Contains(apart, first)
}

// packages are the module's packages by directory, relative to the root
// and slash-separated ("." for the root), each with the module's packages
// its non-test files import (build-tagged files too).
func (m *goModule) packages() map[string][]string {
	pkgs := map[string][]string{}
	for _, f := range m.files {
		dir := path.Dir(f.rel)
		imports := pkgs[dir]
		for _, spec := range f.file.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				continue
			}
			var to string
			switch {
			case p == m.modulePath:
				to = "."
			case strings.HasPrefix(p, m.modulePath+"/"):
				to = strings.TrimPrefix(p, m.modulePath+"/")
			default:
				continue
			}
			if !slices.Contains(imports, to) {
				imports = append(imports, to)
			}
		}
		pkgs[dir] = imports
	}
	return pkgs
}

var (
	packagesHeadingRE = regexp.MustCompile(`^##\s+Packages\s*$`)
	floorsRE          = regexp.MustCompile(`^\*\*Package floors\.\*\*`)
	floorItemRE       = regexp.MustCompile(`^(\d+)\.\s`)
)

// CheckPackages checks the page (docs/architecture.md) against the
// module's packages (dir → imported dirs, as goModule.packages gives
// them); name is how problems name the page.
//
// The table under the heading "Packages" lists a package by its directory
// with a trailing slash in backticks in a row's first cell (`plugin/`,
// `./` for the module root), or by its last element in backticks in the
// row of the nearest directory above it that has a row (`cli` in the row
// of `cmd/nri-cpupool/`, `docscheck` in that of `tools/`). A first cell's
// path that does not exist below root is a problem too.
//
// The numbered list after "**Package floors.**" puts each package outside
// apart on a floor: the highest-numbered item that names its directory in
// backticks (an item may name the packages it sits over, which are on
// higher-numbered floors). Every import must point to a higher-numbered
// floor.
func CheckPackages(root, page, name string, pkgs map[string][]string) ([]string, error) {
	data, err := os.ReadFile(page)
	if err != nil {
		return nil, fmt.Errorf("reading the architecture page, whose table must list every package (pass -architecture \"\" to check none): %w", err)
	}
	lines := strings.Split(string(data), "\n")
	rows, err := packageRows(lines, name)
	if err != nil {
		return nil, err
	}
	floors, err := packageFloors(lines, name, pkgs)
	if err != nil {
		return nil, err
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for listed := range rows {
		if _, err := os.Stat(filepathOf(root, listed)); err != nil {
			add("%s#packages lists `%s`, which does not exist: remove its row, or correct the path", name, listed)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := rows[dir+"/"]; ok {
			continue
		}
		parent, named := "", false
		for a := path.Dir(dir); a != "."; a = path.Dir(a) {
			if contents, ok := rows[a+"/"]; ok {
				parent, named = a+"/", slices.Contains(contents, path.Base(dir))
				break
			}
		}
		switch {
		case named:
		case parent != "":
			add("package %s is not in the table of %s#packages: name `%s`, in backticks, with what it is (its package comment) in the row of `%s`, or give it a row `%s/`", dir, name, path.Base(dir), parent, dir)
		default:
			add("package %s is not in the table of %s#packages: add a row `%s/` with what it is (its package comment), and put it on its floor", shown(dir), name, dir)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(pkgs)) {
		if isApart(dir) {
			continue
		}
		floor, ok := floors[dir]
		if !ok {
			add("package %s is on no floor of %s (the list after **Package floors.**): name it, in backticks, on a floor numbered lower than those of the packages it imports", shown(dir), name)
			continue
		}
		for _, to := range slices.Sorted(slices.Values(pkgs[dir])) {
			if isApart(to) {
				continue
			}
			if f, ok := floors[to]; ok && f <= floor {
				add("package %s (floor %d of %s) imports %s (floor %d): every import points to a floor below (a higher number); move one of them", shown(dir), floor, name, shown(to), f)
			}
		}
	}
	return problems, nil
}

// shown names a package directory in a problem.
func shown(dir string) string {
	if dir == "." {
		return "./ (the module root)"
	}
	return dir
}

// filepathOf is where a path of the table lies below root.
func filepathOf(root, p string) string {
	return filepath.Join(root, filepath.FromSlash(p))
}

// packageRows reads the table under the "Packages" heading: each path of
// a row's first cell (in backticks) with the code spans of its other
// cells.
func packageRows(lines []string, name string) (map[string][]string, error) {
	start := slices.IndexFunc(lines, func(l string) bool { return packagesHeadingRE.MatchString(l) })
	if start < 0 {
		return nil, fmt.Errorf("%s has no heading \"## Packages\", whose table must list every package", name)
	}
	rows := map[string][]string{}
	inTable := false
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := tableCells(t)
		if len(cells) < 2 || strings.Trim(cells[0], "-: ") == "" {
			continue // the separator
		}
		var contents []string
		for _, c := range cells[1:] {
			spans, _ := codeSpans(c)
			for _, s := range spans {
				contents = append(contents, s.text)
			}
		}
		spans, _ := codeSpans(cells[0])
		for _, s := range spans {
			rows[s.text] = contents
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: the heading \"## Packages\" has no table of packages below it", name)
	}
	return rows, nil
}

// tableCells splits a table row on the pipes outside code spans.
func tableCells(row string) []string {
	_, rest := codeSpans(row)
	var cells []string
	from := 0
	for i := 0; i < len(rest); i++ {
		if rest[i] == '|' && (i == 0 || rest[i-1] != '\\') {
			if i > from {
				cells = append(cells, strings.TrimSpace(row[from:i]))
			}
			from = i + 1
		}
	}
	if tail := strings.TrimSpace(row[from:]); tail != "" {
		cells = append(cells, tail)
	}
	return cells
}

// packageFloors reads the list of floors: each package directory (of
// pkgs) an item names in backticks, with the highest item number naming
// it; `./` names the module root.
func packageFloors(lines []string, name string, pkgs map[string][]string) (map[string]int, error) {
	start := slices.IndexFunc(lines, func(l string) bool { return floorsRE.MatchString(l) })
	if start < 0 {
		return nil, fmt.Errorf("%s has no paragraph \"**Package floors.**\" with the numbered list of floors", name)
	}
	floors := map[string]int{}
	item, seen := 0, false
	for _, l := range lines[start+1:] {
		if strings.TrimSpace(l) == "" {
			if seen {
				break
			}
			continue
		}
		if m := floorItemRE.FindStringSubmatch(l); m != nil {
			item, _ = strconv.Atoi(m[1])
			seen = true
		}
		if !seen {
			continue
		}
		spans, _ := codeSpans(l)
		for _, s := range spans {
			dir := strings.TrimSuffix(s.text, "/")
			if s.text == "./" {
				dir = "."
			}
			if _, ok := pkgs[dir]; ok && item > floors[dir] {
				floors[dir] = item
			}
		}
	}
	if len(floors) == 0 {
		return nil, fmt.Errorf("%s: the paragraph \"**Package floors.**\" has no numbered list of floors naming packages below it", name)
	}
	return floors, nil
}
