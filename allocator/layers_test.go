package allocator

// The allocator's files are kept in one direction, as the packages are
// (docs/architecture.md, "The allocator's files"): a file uses names of
// files of its own layer or of the layers below, and no two files use each
// other. The compiler keeps that between packages but not between the files
// of one package, so this test does: it reads each file's layer from that
// table, the one list of them, type-checks the package's files and fails on
// a file without a layer and on a name a file takes from a higher layer.

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layersDoc is the home of each file's layer.
const layersDoc = "../docs/architecture.md"

func TestFilesUseOnlyTheirLayerAndBelow(t *testing.T) {
	doc, err := os.ReadFile(layersDoc)
	require.NoError(t, err)
	layers, err := fileLayers(string(doc))
	require.NoError(t, err, "reading %s", layersDoc)

	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		files[name] = f
	}
	require.NotEmpty(t, files)

	problems, err := layerProblems(fset, files, layers, exportImporter(t, fset))
	require.NoError(t, err)
	if len(problems) > 0 {
		t.Errorf("the allocator's files must use only their own layer and the layers below (the table of %s, \"The allocator's files\"); move the name to a file of the right layer, or the file to another layer in that table:\n  %s",
			layersDoc, strings.Join(problems, "\n  "))
	}
}

// TestLayerCheckCatchesBackReferences shows the check above can fail: a
// small package whose files break each rule once.
func TestLayerCheckCatchesBackReferences(t *testing.T) {
	doc := "## The allocator's files\n\n| layer | files | what |\n|---|---|---|\n" +
		"| 1. bottom | `low.go`, `peer.go` | x |\n| 2. top | `high.go` | y |\n\n## Next\n\n| 1. not | `other.go` | z |\n"
	layers, err := fileLayers(doc)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"low.go": 1, "peer.go": 1, "high.go": 2}, layers, "only the section's table")

	sources := map[string]string{
		"low.go":   "package p\n\ntype books struct{ n int }\n\nfunc low() int { return high() + peer() }\n\nfunc (b books) count() int { return b.n }\n",
		"peer.go":  "package p\n\nfunc peer() int { return low() }\n",
		"high.go":  "package p\n\nfunc high() int { return books{}.count() + unlisted }\n",
		"extra.go": "package p\n\nvar unlisted = 1\n",
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for name, src := range sources {
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		require.NoError(t, err)
		files[name] = f
	}
	problems, err := layerProblems(fset, files, layers, importer.Default())
	require.NoError(t, err)
	assert.Equal(t, []string{
		"allocator/extra.go has no layer: add it to the table",
		"allocator/low.go (layer 1) uses high of allocator/high.go (layer 2), first at line 5",
		"allocator/low.go and allocator/peer.go use each other (low.go uses peer at line 5, peer.go uses low at line 3)",
	}, problems)

	delete(layers, "extra.go")
	layers["gone.go"] = 1
	delete(files, "extra.go")
	files["high.go"], err = parser.ParseFile(fset, "high.go", "package p\n\nfunc high() int { return books{}.count() }\n", parser.SkipObjectResolution)
	require.NoError(t, err)
	problems, err = layerProblems(fset, files, layers, importer.Default())
	require.NoError(t, err)
	assert.Contains(t, problems, "allocator/gone.go is in the table but is not a file of the package: take it out")
}

// layerRow is a row of the table: "| 3. choosing | `policy.go`, ... | ... |".
var (
	layerRow  = regexp.MustCompile(`^\|\s*(\d+)\.[^|]*\|([^|]*)\|`)
	layerFile = regexp.MustCompile("`([^`]+\\.go)`")
)

// fileLayers reads each file's layer from the table of the section "The
// allocator's files" of the architecture document.
func fileLayers(doc string) (map[string]int, error) {
	const heading = "## The allocator's files"
	start := strings.Index(doc, heading)
	if start < 0 {
		return nil, fmt.Errorf("no section %q", heading)
	}
	section := doc[start+len(heading):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	layers := map[string]int{}
	for line := range strings.Lines(section) {
		m := layerRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		layer, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("layer of row %q: %w", strings.TrimSpace(line), err)
		}
		for _, f := range layerFile.FindAllStringSubmatch(m[2], -1) {
			if was, ok := layers[f[1]]; ok {
				return nil, fmt.Errorf("%s is in layers %d and %d: give it one", f[1], was, layer)
			}
			layers[f[1]] = layer
		}
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("section %q has no table of layers (rows \"| N. name | `file.go`, ... | ... |\")", heading)
	}
	return layers, nil
}

// layerProblems type-checks the files as one package and lists, sorted,
// each file without a layer, each table entry without a file, each name
// (function, method, type, variable, constant, field) a file uses of a file
// of a higher layer, and each pair of files that use each other.
func layerProblems(fset *token.FileSet, files map[string]*ast.File, layers map[string]int, imp types.Importer) ([]string, error) {
	var problems []string
	var all []*ast.File
	for _, name := range slices.Sorted(maps.Keys(files)) {
		all = append(all, files[name])
		if _, ok := layers[name]; !ok {
			problems = append(problems, "allocator/"+name+" has no layer: add it to the table")
		}
	}
	for name := range layers {
		if _, ok := files[name]; !ok {
			problems = append(problems, "allocator/"+name+" is in the table but is not a file of the package: take it out")
		}
	}

	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check("allocator", fset, all, info)
	if err != nil {
		return nil, fmt.Errorf("type-checking the package: %w", err)
	}

	// use is the first place a file uses a name of another file.
	type use struct {
		user, owner string
		name        string
	}
	first := map[use]int{}
	uses := map[[2]string]use{} // the first name a file uses of another, by (user, owner)
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !packageLevel(pkg, obj) {
			continue
		}
		user, owner := fset.Position(id.Pos()), fset.Position(obj.Pos())
		if user.Filename == owner.Filename {
			continue
		}
		u := use{user: user.Filename, owner: owner.Filename, name: objectName(obj)}
		if line, ok := first[u]; !ok || user.Line < line {
			first[u] = user.Line
		}
	}
	for _, u := range slices.SortedFunc(maps.Keys(first), func(a, b use) int {
		return cmp.Or(strings.Compare(a.user, b.user), strings.Compare(a.owner, b.owner), first[a]-first[b], strings.Compare(a.name, b.name))
	}) {
		pair := [2]string{u.user, u.owner}
		if _, ok := uses[pair]; !ok {
			uses[pair] = u
		}
		lu, uok := layers[u.user]
		lo, ook := layers[u.owner]
		if uok && ook && lo > lu {
			problems = append(problems, fmt.Sprintf("allocator/%s (layer %d) uses %s of allocator/%s (layer %d), first at line %d",
				u.user, lu, u.name, u.owner, lo, first[u]))
		}
	}
	for pair, u := range uses {
		back, ok := uses[[2]string{pair[1], pair[0]}]
		if !ok || pair[0] > pair[1] || layers[pair[0]] != layers[pair[1]] {
			continue // across layers, the higher one's use is reported above
		}
		problems = append(problems, fmt.Sprintf("allocator/%s and allocator/%s use each other (%s uses %s at line %d, %s uses %s at line %d)",
			pair[0], pair[1], pair[0], u.name, first[u], pair[1], back.name, first[back]))
	}
	slices.Sort(problems)
	return problems, nil
}

// packageLevel is whether obj is declared at the package's level: a
// function, type, variable or constant of its scope, or a method or field
// of one of its types.
func packageLevel(pkg *types.Package, obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return o.Parent() == pkg.Scope() || o.Signature().Recv() != nil
	case *types.Var:
		return o.Parent() == pkg.Scope() || o.IsField()
	case *types.TypeName, *types.Const:
		return obj.Parent() == pkg.Scope()
	}
	return false
}

// objectName names obj for the message: a method or field with its type.
func objectName(obj types.Object) string {
	if f, ok := obj.(*types.Func); ok {
		if recv := f.Signature().Recv(); recv != nil {
			t := recv.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				return n.Obj().Name() + "." + f.Name()
			}
		}
	}
	if v, ok := obj.(*types.Var); ok && v.IsField() {
		return "field " + v.Name()
	}
	return obj.Name()
}

// exportImporter imports the package's dependencies from the compiler's
// export data, which `go list -export` builds (or finds in the cache).
func exportImporter(t *testing.T, fset *token.FileSet) types.Importer {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".").Output()
	require.NoError(t, err, "go list -export -deps .")
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}
