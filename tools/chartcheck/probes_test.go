package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
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
// never ready), while chartcheck passed it. Liveness on /readyz restarts a
// healthy plugin whenever it is merely not ready (before the runtime's
// first Synchronize): it was only documented as discouraged.
func TestCheckProbePath(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"liveness without a path", "path: /healthz}", "path: }", `liveness probe GETs "", which the daemon does not serve`},
		{"liveness with an empty path", "path: /healthz}", `path: ""}`, `liveness probe GETs "", which the daemon does not serve`},
		{"readiness on /", "path: /readyz}", "path: /}", `readiness probe GETs "/", which the daemon does not serve`},
		{"liveness on the handler clocks", "path: /healthz}", "path: /debug/handler-clocks}", `liveness probe GETs "/debug/handler-clocks", which the daemon does not serve`},
		{"a trailing slash", "path: /readyz}", "path: /readyz/}", `readiness probe GETs "/readyz/"`},
		{"readiness with a query", "path: /readyz}", `path: "/readyz?verbose"}`, ""},
		{"liveness on the metrics", "path: /healthz}", "path: /metrics}", ""},
		{"liveness on the readiness", "path: /healthz}", "path: /readyz}", `liveness probe GETs "/readyz", the daemon's readiness`},
		{"liveness on the verbose readiness", "path: /healthz}", `path: "/readyz?verbose"}`, `liveness probe GETs "/readyz?verbose", the daemon's readiness`},
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
// there fails here rather than in every pod's probes. And the chart's
// values.schema.json, which refuses a probe path at helm install (chartcheck
// runs only in CI, on the chart's own ci/ values), takes exactly these: its
// pattern took any path from /, so --set probes.liveness.path=/livez
// installed and liveness restarted the plugin every ~35 s for ever.
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
	for _, probe := range []string{"liveness", "readiness"} {
		t.Run("the chart's schema on probes."+probe+".path", func(t *testing.T) { schemaTakesProbePaths(t, probe) })
	}
	assert.Subset(t, probePaths, notLiveness, "notLiveness: routes the daemon serves")
	assert.NotContains(t, notLiveness, "/healthz", "the chart's default liveness probe")
}

// schemaProbePattern is the shape of the schema's probe path pattern: the
// routes of probePaths (without their /) as alternatives, and any query.
var schemaProbePattern = regexp.MustCompile(`^\^/\(([a-z|]+)\)\(\\\?\.\*\)\?\$$`)

// schemaTakesProbePaths: the pattern values.schema.json requires of an
// enabled probe's path names the routes of probePaths, no more, no less
// (for liveness, less those of notLiveness), and takes what
// checkProbePath takes. A route of notLiveness is also refused by the
// liveness path's if/then, whose const is the error helm shows ("value
// must be '/healthz'"): the pattern's alone would not say what to use.
func schemaTakesProbePaths(t *testing.T, probe string) {
	file := filepath.Join("..", "..", "deploy", "helm", "nri-cpupool", "values.schema.json")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var schema struct {
		Properties struct {
			Probes struct {
				Properties map[string]struct {
					Then struct {
						Properties struct {
							Path struct {
								Pattern string `json:"pattern"`
								If      struct {
									Pattern string `json:"pattern"`
								} `json:"if"`
								Then struct {
									Const *string `json:"const"`
								} `json:"then"`
							} `json:"path"`
						} `json:"properties"`
					} `json:"then"`
				} `json:"properties"`
			} `json:"probes"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(data, &schema), file)
	path := schema.Properties.Probes.Properties[probe].Then.Properties.Path
	pattern := path.Pattern
	m := schemaProbePattern.FindStringSubmatch(pattern)
	require.NotNil(t, m, "%s: probes.%s's path pattern %q is not ^/(ROUTE|...)(\\?.*)?$: update this test", file, probe, pattern)
	var routes []string
	for _, r := range strings.Split(m[1], "|") {
		routes = append(routes, "/"+r)
	}
	want := probePaths
	if probe == "liveness" {
		want = slices.DeleteFunc(slices.Clone(probePaths), func(p string) bool { return slices.Contains(notLiveness, p) })
	}
	assert.ElementsMatch(t, want, routes, "%s: probes.%s's path pattern %q", file, probe, pattern)
	re, err := regexp.Compile(pattern)
	require.NoError(t, err)
	candidates := []string{"", "/", "/livez", "/health", "/healthz/", "/healthzz", "/x/healthz", "/metrics/x", "/debug/handler-clocks", "healthz"}
	for _, p := range probePaths {
		candidates = append(candidates, p, p+"?verbose", p+"/", p+"x")
	}
	for _, c := range candidates {
		assert.Equal(t, checkProbePath(probe, c) == nil, re.MatchString(c), "%s: probes.%s's path pattern %q on %q, against chartcheck", file, probe, pattern, c)
	}
	if probe != "liveness" {
		assert.Empty(t, path.If.Pattern, "%s: probes.%s's path has an if: update this test", file, probe)
		return
	}
	require.NotNil(t, path.Then.Const, "%s: probes.liveness's path has no then.const, the path helm's error names", file)
	assert.Equal(t, "/healthz", *path.Then.Const, "%s: probes.liveness's path then.const", file)
	ifRe, err := regexp.Compile(path.If.Pattern)
	require.NoError(t, err)
	for _, c := range candidates {
		route, _, _ := strings.Cut(c, "?")
		assert.Equal(t, slices.Contains(notLiveness, route), ifRe.MatchString(c), "%s: probes.liveness's path if pattern %q on %q, against notLiveness", file, path.If.Pattern, c)
	}
}
