package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckProbePath: a probe GETs a path the daemon serves. The chart's
// probes.liveness.path removed (--set probes.liveness.path=null) or empty
// rendered `httpGet: {path: }`: the kubelet GETs /, the daemon answers
// 404, and liveness restarted the plugin every ~35 s for ever (readiness:
// never ready), while chartcheck passed it.
func TestCheckProbePath(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"liveness without a path", "path: /healthz}", "path: }", `liveness probe GETs "", which the daemon does not serve`},
		{"liveness with an empty path", "path: /healthz}", `path: ""}`, `liveness probe GETs "", which the daemon does not serve`},
		{"readiness on /", "path: /readyz}", "path: /}", `readiness probe GETs "/", which the daemon does not serve`},
		{"liveness on the handler clocks", "path: /healthz}", "path: /debug/handler-clocks}", `liveness probe GETs "/debug/handler-clocks", which the daemon does not serve`},
		{"a trailing slash", "path: /readyz}", "path: /readyz/}", `readiness probe GETs "/readyz/"`},
		{"readiness with a query", "path: /readyz}", `path: "/readyz?verbose"}`, ""},
		{"liveness on the metrics", "path: /healthz}", "path: /metrics}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := check([]byte(strings.Replace(good, tc.from, tc.to, 1)))
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestProbePathsAreWhatTheDaemonServes: probePaths is what the daemon's
// metricsHandler (cmd/nri-cpupool/internal/cli/run.go, an internal package
// chartcheck cannot import) routes unconditionally, so that a path renamed
// there fails here rather than in every pod's probes.
func TestProbePathsAreWhatTheDaemonServes(t *testing.T) {
	file := filepath.Join("..", "..", "cmd", "nri-cpupool", "internal", "cli", "run.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	var handler *ast.FuncDecl
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "metricsHandler" {
			handler = fn
		}
	}
	require.NotNil(t, handler, "%s: no func metricsHandler", file)
	var served []string
	// Only the top-level statements: a route registered under an if (the
	// handler clocks, served when creations are timed) is no probe's.
	for _, stmt := range handler.Body.List {
		expr, ok := stmt.(*ast.ExprStmt)
		if !ok {
			continue
		}
		call, ok := expr.X.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			continue
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
			continue
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		require.True(t, ok && lit.Kind == token.STRING, "%s: metricsHandler routes a path that is not a string literal: update this test", file)
		path, err := strconv.Unquote(lit.Value)
		require.NoError(t, err)
		served = append(served, path)
	}
	assert.ElementsMatch(t, served, probePaths)
	assert.True(t, slices.Contains(probePaths, "/healthz") && slices.Contains(probePaths, "/readyz"), "the chart's default probes")
}
