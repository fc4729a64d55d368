package main

import (
	"bufio"
	"encoding"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/pools"
)

// Name is one thing the code defines that the docs must name.
type Name struct {
	Name string
	// File is where it is defined, relative to the root ("" if unknown).
	File string
}

// segKind tells how a config key segment may be written in the docs.
type segKind int

const (
	segField segKind = iota // a struct field: its yaml name
	segPool                 // a struct field named after a pool: the name or a <placeholder>
	segMap                  // a map key: a <placeholder> or any name
)

type segment struct {
	name string // the yaml name; "<name>" for a map key
	kind segKind
}

// ConfigKey is a leaf of the configuration.
type ConfigKey struct {
	Segments []segment
	// File declares the struct that holds the key's field.
	File string
}

// String is the key's dotted path, <name> for map keys.
func (k ConfigKey) String() string {
	parts := make([]string, len(k.Segments))
	for i, s := range k.Segments {
		parts[i] = s.name
	}
	return strings.Join(parts, ".")
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself tells whether YAML decodes t through its own method, so
// that its fields are not keys.
func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(yamlUnmarshaler) || pt.Implements(yamlUnmarshaler) ||
		t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler)
}

// ConfigKeys walks t (the config file's type) by its yaml tags and returns
// its leaves in field order. typeFile maps a struct type's name to the
// file declaring it, for messages.
func ConfigKeys(t reflect.Type, typeFile map[string]string) []ConfigKey {
	var keys []ConfigKey
	var walk func(t reflect.Type, prefix []segment, file string)
	walk = func(t reflect.Type, prefix []segment, file string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		leaf := func() {
			if len(prefix) > 0 {
				keys = append(keys, ConfigKey{Segments: slices.Clone(prefix), File: file})
			}
		}
		if decodesItself(t) {
			leaf()
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			own := file
			if f, ok := typeFile[t.Name()]; ok && t.Name() != "" {
				own = f
			}
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() && !f.Anonymous {
					continue // yaml.v3 reads exported fields and embedded structs
				}
				name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if name == "-" {
					continue
				}
				if slices.Contains(strings.Split(opts, ","), "inline") {
					walk(f.Type, prefix, own)
					continue
				}
				if name == "" {
					name = strings.ToLower(f.Name) // yaml.v3's default
				}
				kind := segField
				if pools.Known(name) {
					kind = segPool
				}
				walk(f.Type, append(slices.Clip(prefix), segment{name, kind}), own)
			}
		case reflect.Map:
			walk(t.Elem(), append(slices.Clip(prefix), segment{"<name>", segMap}), file)
		case reflect.Slice, reflect.Array:
			e := t.Elem()
			for e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if e.Kind() == reflect.Struct && !decodesItself(e) {
				walk(e, prefix, file) // a list of objects: their keys
				return
			}
			leaf()
		default:
			leaf()
		}
	}
	walk(t, nil, "")
	return keys
}

// goFile is one parsed non-test Go file of the module.
type goFile struct {
	rel  string // relative to the root, slash-separated
	dir  string
	file *ast.File
}

// goModule holds the parsed non-test Go files under root.
type goModule struct {
	root  string
	fset  *token.FileSet
	files []goFile
	// consts are the package-level string constants of each directory.
	consts map[string]map[string]string
	// modulePath is go.mod's module path.
	modulePath string
}

// skipDir tells whether a directory holds no module code to read.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// parseModule parses every non-test Go file below root.
func parseModule(root string) (*goModule, error) {
	m := &goModule{root: root, fset: token.NewFileSet(), consts: map[string]map[string]string{}}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("reading go.mod (run from the repository root or pass -root): %w", err)
	}
	for line := range strings.SplitSeq(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			m.modulePath = strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(m.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.Dir(path)
		m.files = append(m.files, goFile{rel: filepath.ToSlash(rel), dir: dir, file: f})
		if m.consts[dir] == nil {
			m.consts[dir] = map[string]string{}
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							m.consts[dir][id.Name] = s
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// stringLit is the value of a string literal.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// stringValue evaluates a string literal, a package-level string constant
// of dir, or a + of those.
func (m *goModule) stringValue(e ast.Expr, dir string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return stringLit(e)
	case *ast.Ident:
		s, ok := m.consts[dir][e.Name]
		return s, ok
	case *ast.ParenExpr:
		return m.stringValue(e.X, dir)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok1 := m.stringValue(e.X, dir)
		y, ok2 := m.stringValue(e.Y, dir)
		return x + y, ok1 && ok2
	}
	return "", false
}

// pos is file:line of p, the file relative to the root.
func (m *goModule) pos(p token.Pos) string {
	return fmt.Sprintf("%s:%d", m.relFile(p), m.fset.Position(p).Line)
}

// relFile is the file of p, relative to the root.
func (m *goModule) relFile(p token.Pos) string {
	name := m.fset.Position(p).Filename
	if rel, err := filepath.Rel(m.root, name); err == nil {
		return filepath.ToSlash(rel)
	}
	return name
}

// typeFiles maps the struct types declared in dir to their files.
func (m *goModule) typeFiles(dir string) map[string]string {
	out := map[string]string{}
	for _, f := range m.files {
		if f.dir != dir {
			continue
		}
		for _, decl := range f.file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				out[spec.(*ast.TypeSpec).Name.Name] = f.rel
			}
		}
	}
	return out
}

// annotationRE is an annotation key of the project's domain.
var annotationRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?\.cpupool\.dev$`)

// Annotations are the string constants of the form <word>.cpupool.dev.
func (m *goModule) Annotations() []Name { return m.constants(annotationRE) }

// eventReasonRE is a reason of the plugin's pod Events: UpperCamelCase,
// CPUPool first, as kubectl's REASON column shows it.
var eventReasonRE = regexp.MustCompile(`^CPUPool[A-Z][A-Za-z]*$`)

// EventReasons are the string constants of the form CPUPool<Words>, the
// reasons of the pod Events (plugin/podevents.go).
func (m *goModule) EventReasons() []Name { return m.constants(eventReasonRE) }

// constants are the string constants of the module that re matches, each
// once, with the file that first declares it.
func (m *goModule) constants(re *regexp.Regexp) []Name {
	seen := map[string]bool{}
	var out []Name
	for _, f := range m.files {
		for _, decl := range f.file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if s, ok := stringLit(v); ok && re.MatchString(s) && !seen[s] {
						seen[s] = true
						out = append(out, Name{s, f.rel})
					}
				}
			}
		}
	}
	sortNames(out)
	return out
}

const prometheusPath = "github.com/prometheus/client_golang/prometheus"

// importName is the name f refers to the package path by ("" if f does
// not import it).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// isSel tells whether e is pkg.<sel> with sel satisfying ok.
func isSel(e ast.Expr, pkg string, ok func(string) bool) bool {
	s, isSel := e.(*ast.SelectorExpr)
	if !isSel {
		return false
	}
	id, isID := s.X.(*ast.Ident)
	return isID && id.Name == pkg && ok(s.Sel.Name)
}

// Metrics are the names given to prometheus.NewDesc and the *Opts
// literals; problems are the names that are not constant.
func (m *goModule) Metrics() (names []Name, problems []string) {
	seen := map[string]bool{}
	add := func(name, file string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, Name{name, file})
		}
	}
	for _, f := range m.files {
		pkg := importName(f.file, prometheusPath)
		if pkg == "" {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if isSel(n.Fun, pkg, func(s string) bool { return s == "NewDesc" }) && len(n.Args) > 0 {
					if s, ok := m.stringValue(n.Args[0], f.dir); ok {
						add(s, f.rel)
					} else {
						problems = append(problems, fmt.Sprintf("%s: cannot read the metric name given to %s.NewDesc: write it as a string literal or constant, so that docscheck can check it is documented", m.pos(n.Pos()), pkg))
					}
				}
			case *ast.CompositeLit:
				if !isSel(n.Type, pkg, func(s string) bool { return strings.HasSuffix(s, "Opts") }) {
					return true
				}
				var parts []string
				named := false
				for _, field := range []string{"Namespace", "Subsystem", "Name"} {
					for _, elt := range n.Elts {
						kv, ok := elt.(*ast.KeyValueExpr)
						if id, isID := kv.Key.(*ast.Ident); !ok || !isID || id.Name != field {
							continue
						}
						named = named || field == "Name"
						s, ok := m.stringValue(kv.Value, f.dir)
						if !ok {
							problems = append(problems, fmt.Sprintf("%s: cannot read the metric's %s: write it as a string literal or constant, so that docscheck can check it is documented", m.pos(kv.Pos()), field))
						} else if s != "" {
							parts = append(parts, s)
						}
					}
				}
				if named && len(parts) > 0 {
					add(strings.Join(parts, "_"), f.rel)
				}
			}
			return true
		})
	}
	sortNames(names)
	return names, problems
}

// Command is a subcommand and its flags.
type Command struct {
	Name  string
	File  string
	Flags []string
}

// flagNameArg is the index of the flag's name among the arguments of each
// flag.FlagSet method that defines a flag.
var flagNameArg = map[string]int{
	"Bool": 0, "Duration": 0, "Float64": 0, "Func": 0, "BoolFunc": 0, "Int": 0, "Int64": 0, "String": 0, "Uint": 0, "Uint64": 0,
	"BoolVar": 1, "DurationVar": 1, "Float64Var": 1, "IntVar": 1, "Int64Var": 1, "StringVar": 1, "UintVar": 1, "Uint64Var": 1,
	"TextVar": 1, "Var": 1,
}

// Commands reads the command table ([]command{...}) of the CLI package
// in dir (relative to the root) and each command's flags.
func (m *goModule) Commands(dir string) ([]Command, error) {
	abs := filepath.Join(m.root, dir)
	funcs := map[string]*ast.FuncDecl{}
	var pkgFiles []goFile
	for _, f := range m.files {
		if f.dir != abs {
			continue
		}
		pkgFiles = append(pkgFiles, f)
		for _, decl := range f.file.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	// The command struct: which positional field is the name, which the
	// function.
	nameIdx, runIdx := -1, -1
	var runName string
	for _, f := range pkgFiles {
		ast.Inspect(f.file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "command" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			i := 0
			for _, field := range st.Fields.List {
				for _, id := range field.Names {
					if _, isFunc := field.Type.(*ast.FuncType); isFunc && runIdx < 0 {
						runIdx, runName = i, id.Name
					}
					if id.Name == "name" {
						nameIdx = i
					}
					i++
				}
			}
			return false
		})
	}
	if nameIdx < 0 || runIdx < 0 {
		return nil, fmt.Errorf("%s: no `type command struct` with a name and a func field: update tools/docscheck to the CLI's command table", dir)
	}
	var cmds []Command
	for _, f := range pkgFiles {
		ast.Inspect(f.file, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			at, ok := cl.Type.(*ast.ArrayType)
			if !ok {
				return true
			}
			if id, isID := at.Elt.(*ast.Ident); !isID || id.Name != "command" {
				return true
			}
			for _, elt := range cl.Elts {
				el, ok := elt.(*ast.CompositeLit)
				if !ok {
					continue
				}
				var nameExpr, runExpr ast.Expr
				for i, e := range el.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						key, _ := kv.Key.(*ast.Ident)
						if key == nil {
							continue
						}
						switch key.Name {
						case "name":
							nameExpr = kv.Value
						case runName:
							runExpr = kv.Value
						}
						continue
					}
					switch i {
					case nameIdx:
						nameExpr = e
					case runIdx:
						runExpr = e
					}
				}
				name, ok := m.stringValue(nameExpr, abs)
				if !ok {
					continue
				}
				c := Command{Name: name, File: f.rel}
				if id, ok := runExpr.(*ast.Ident); ok {
					if fd := funcs[id.Name]; fd != nil {
						c.File = m.relFile(fd.Pos())
						c.Flags = m.flags(fd, funcs, abs, map[string]bool{})
					}
				}
				cmds = append(cmds, c)
			}
			return false
		})
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("%s: no []command{...} table: update tools/docscheck to the CLI's command table", dir)
	}
	return cmds, nil
}

// takesFlagSet tells whether fd has a *flag.FlagSet parameter.
func takesFlagSet(fd *ast.FuncDecl) bool {
	for _, p := range fd.Type.Params.List {
		if star, ok := p.Type.(*ast.StarExpr); ok && isSel(star.X, "flag", func(s string) bool { return s == "FlagSet" }) {
			return true
		}
	}
	return false
}

// flagNameParams are the positions of fd's parameters that it passes as
// the name of a flag it defines (fs.Var(&d, name, usage)).
func flagNameParams(fd *ast.FuncDecl) []int {
	pos := map[string]int{}
	n := 0
	for _, p := range fd.Type.Params.List {
		for _, id := range p.Names {
			pos[id.Name] = n
			n++
		}
		if len(p.Names) == 0 {
			n++
		}
	}
	var out []int
	ast.Inspect(fd.Body, func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if i, ok := flagNameArg[sel.Sel.Name]; ok && i < len(call.Args) {
			if id, ok := call.Args[i].(*ast.Ident); ok {
				if at, ok := pos[id.Name]; ok {
					out = append(out, at)
				}
			}
		}
		return true
	})
	return out
}

// flags are the flags fd defines, itself or through the package's
// functions it calls that take a *flag.FlagSet.
func (m *goModule) flags(fd *ast.FuncDecl, funcs map[string]*ast.FuncDecl, dir string, visited map[string]bool) []string {
	visited[fd.Name.Name] = true
	var out []string
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			if i, ok := flagNameArg[fun.Sel.Name]; ok && len(call.Args) >= 3 {
				if s, ok := m.stringValue(call.Args[i], dir); ok {
					out = append(out, s)
				}
			}
		case *ast.Ident:
			callee := funcs[fun.Name]
			if callee == nil || !takesFlagSet(callee) {
				break
			}
			// A helper that defines a flag named by its caller
			// (durationVar(fs, "sample", …)): the name is at the call.
			for _, i := range flagNameParams(callee) {
				if i < len(call.Args) {
					if s, ok := m.stringValue(call.Args[i], dir); ok {
						out = append(out, s)
					}
				}
			}
			if !visited[fun.Name] {
				out = append(out, m.flags(callee, funcs, dir, visited)...)
			}
		}
		return true
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// MakeTargets are the .PHONY targets of a Makefile but its default goal.
func MakeTargets(makefile string) ([]string, error) {
	f, err := os.Open(makefile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var phony []string
	var defaultGoal string
	ruleRE := regexp.MustCompile(`^([A-Za-z0-9_.-]+)\s*:([^=]|$)`)
	sc := bufio.NewScanner(f)
	cont := false
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok || cont {
			if !ok {
				rest = line
			}
			cont = strings.HasSuffix(rest, "\\")
			phony = append(phony, strings.Fields(strings.TrimSuffix(rest, "\\"))...)
			continue
		}
		if m := ruleRE.FindStringSubmatch(line); m != nil && defaultGoal == "" && !strings.HasPrefix(m[1], ".") {
			defaultGoal = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, t := range phony {
		if t != defaultGoal && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func sortNames(ns []Name) {
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
}
