package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// shipped is the repository's dashboard.
func shipped(t *testing.T) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "../../deploy/monitoring/nri-cpupool-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// mutated is the shipped dashboard changed by change, which gets it as
// decoded JSON.
func mutated(t *testing.T, change func(d map[string]any)) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(shipped(t), &d); err != nil {
		t.Fatal(err)
	}
	change(d)
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// panel is the shipped dashboard's panel i (0: the first row, 1: the
// "Runtime connected" stat, 10: the "CPUs per pool" time series).
func panel(d map[string]any, i int) map[string]any { return d["panels"].([]any)[i].(map[string]any) }

func target(d map[string]any, i int) map[string]any {
	return panel(d, i)["targets"].([]any)[0].(map[string]any)
}

// promtool is make lint's, named by $PROMTOOL: make unit (and so make
// test) sets it; by hand, run
// PROMTOOL=~/.cache/nri-cpupool-tools/promtool-v0.316.0 go test ./tools/dashcheck.
func promtool(t *testing.T) string {
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Skip("PROMTOOL is not set: the expressions are not parsed")
	}
	return p
}

func TestShippedDashboardPasses(t *testing.T) {
	res, err := Check(shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		t.Fatalf("problems:\n%s", strings.Join(res.Problems, "\n"))
	}
	if res.Panels < 20 || len(res.Queries) < 20 {
		t.Errorf("%d panels and %d expressions checked: the SDK decoded less than the dashboard has", res.Panels, len(res.Queries))
	}
	t.Run("expressions parse", func(t *testing.T) {
		problems, err := CheckPromQL(promtool(t), res.Queries, res.Variables)
		if err != nil || len(problems) > 0 {
			t.Fatalf("err %v, problems:\n%s", err, strings.Join(problems, "\n"))
		}
	})
}

// TestFaultsAreFound: each fault put into the shipped dashboard is
// reported, saying where and what.
func TestFaultsAreFound(t *testing.T) {
	tests := []struct {
		name   string
		change func(d map[string]any)
		want   string
	}{
		{"a dashboard field Grafana does not have", func(d map[string]any) { d["__inputs"] = []any{} },
			"Dashboard: unexpected field '__inputs'"},
		{"a misspelt stat option", func(d map[string]any) { panel(d, 1)["options"].(map[string]any)["colourMode"] = "background" },
			"panels[1].options.Options: unexpected field 'colourMode'"},
		{"a required stat option left out", func(d map[string]any) { delete(panel(d, 1)["options"].(map[string]any), "wideLayout") },
			"panels[1].options.wideLayout: required field is missing"},
		{"a misspelt field config", func(d map[string]any) {
			panel(d, 1)["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unti"] = "short"
		}, `panel 2 "Runtime connected": Grafana's dashboard schema: fieldConfig.defaults.FieldConfig: unexpected field 'unti'`},
		{"a misspelt Prometheus query field", func(d map[string]any) { target(d, 1)["legend"] = "x" },
			"panels[1].targets[0].Dataquery: unexpected field 'legend'"},
		{"a panel on a fixed data source", func(d map[string]any) {
			panel(d, 1)["datasource"] = map[string]any{"type": "prometheus", "uid": "prom-1"}
		},
			`panel 2 "Runtime connected": datasource {type "prometheus", uid "prom-1"}; write {"type": "prometheus", "uid": "${datasource}"}`},
		{"a panel without data source", func(d map[string]any) { delete(panel(d, 1), "datasource") },
			`panel 2 "Runtime connected": no datasource`},
		{"a target on another data source", func(d map[string]any) {
			target(d, 1)["datasource"] = map[string]any{"type": "prometheus", "uid": "other"}
		},
			`panel 2 "Runtime connected" target A: datasource {type "prometheus", uid "other"}`},
		{"no data source variable", func(d map[string]any) {
			list := d["templating"].(map[string]any)["list"].([]any)
			d["templating"].(map[string]any)["list"] = list[1:]
		}, "no Prometheus data source variable"},
		{"a variable nobody declared", func(d map[string]any) { target(d, 1)["expr"] = `min(cpupool_runtime_connected{instance=~"$node"})` },
			`panel 2 "Runtime connected" target A: uses variable $node, which the dashboard does not declare`},
		{"a variable query that is not label_values", func(d map[string]any) {
			v := d["templating"].(map[string]any)["list"].([]any)[1].(map[string]any)
			v["query"].(map[string]any)["query"] = "cpupool_pool_cpus"
		}, `variable instance: query "cpupool_pool_cpus" is not label_values(SELECTOR, LABEL)`},
		{"two panels with one id", func(d map[string]any) { panel(d, 3)["id"] = 2 },
			`id 2 is also panel 2 "Runtime connected"'s`},
		{"a panel past the grid", func(d map[string]any) { panel(d, 1)["gridPos"].(map[string]any)["x"] = 20 },
			`panel 2 "Runtime connected": gridPos x 20 + w 6 is past the grid's 24 columns`},
		{"two targets with one refId", func(d map[string]any) {
			p := panel(d, 1)
			p["targets"] = append(p["targets"].([]any), p["targets"].([]any)[0])
		}, `panel 2 "Runtime connected": target 1 has no refId or the one of another target ("A")`},
		{"a panel type Grafana does not have", func(d map[string]any) { panel(d, 1)["type"] = "stats" },
			`panel type "stats" is none of those Grafana's schema models`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(mutated(t, tc.change))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.Problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("no problem says %q; got:\n%s", tc.want, strings.Join(res.Problems, "\n"))
		})
	}
}

// TestBadExpressionIsFound: Prometheus' parser refuses an expression, and
// the problem names the panel; Grafana's variables are not taken for
// errors ($__rate_interval in a range, $instance in a matcher).
func TestBadExpressionIsFound(t *testing.T) {
	bin := promtool(t)
	raw := mutated(t, func(d map[string]any) {
		target(d, 10)["expr"] = `sum by (pool) (rate(cpupool_pool_cpus{instance=~"$instance"}[$__rate_interval])`
	})
	res, err := Check(raw)
	if err != nil || len(res.Problems) > 0 {
		t.Fatalf("err %v, problems %v", err, res.Problems)
	}
	problems, err := CheckPromQL(bin, res.Queries, res.Variables)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], `panel 11 "CPUs per pool" target A: Prometheus cannot parse its expression:`) ||
		!strings.Contains(problems[0], "unclosed left parenthesis") {
		t.Errorf("problems: %q", problems)
	}
}

func TestInterpolate(t *testing.T) {
	res, err := Check(shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	got := Interpolate(`rate(x{instance=~"$instance",a="${instance:regex}"}[$__rate_interval]) > $__range_s`, res.Variables)
	if want := `rate(x{instance=~".*",a=".*"}[5m]) > 300`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
