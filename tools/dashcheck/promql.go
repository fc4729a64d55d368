package main

// Every expression of the dashboard, with Grafana's variables replaced as
// Grafana replaces them before it sends the query, must parse with
// Prometheus' own parser: promtool's (make lint's PROMTOOL), given the
// expressions as recording rules, which `promtool check rules` parses.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// sampleDuration stands for Grafana's interval variables ($__rate_interval
// and the like), which it replaces with a duration such as "1m0s".
const sampleDuration = "5m"

// Interpolate is expr as Grafana sends it: each variable replaced by a
// value it could have (an "All" variable by its allValue, another by its
// current value, a duration variable by a duration, a millisecond or
// second one by a number).
func Interpolate(expr string, vars map[string]dashboard.VariableModel) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(ref string) string {
		m := grafanaVariable.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := vars[name]; ok {
			return sampleValue(v)
		}
		switch {
		case strings.HasSuffix(name, "_ms"):
			return "300000"
		case strings.HasSuffix(name, "_s"):
			return "300"
		case name == "__from" || name == "__to":
			return "1700000000000"
		case strings.HasPrefix(name, "__"):
			return sampleDuration
		}
		return ref
	})
}

func sampleValue(v dashboard.VariableModel) string {
	if v.AllValue != nil && *v.AllValue != "" {
		return *v.AllValue
	}
	if v.Current != nil && v.Current.Value.String != nil && *v.Current.Value.String != "" {
		return *v.Current.Value.String
	}
	return "x"
}

// CheckPromQL runs promtool check rules on the queries, interpolated, as
// recording rules, and returns its complaints, which name the record
// (Query.Record) and the position in the expression.
func CheckPromQL(promtool string, queries []Query, vars map[string]dashboard.VariableModel) ([]string, error) {
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	where := map[string]string{}
	for _, q := range queries {
		rules = append(rules, rule{Record: q.Record, Expr: Interpolate(q.Expr, vars)})
		where[q.Record] = q.Where
	}
	doc := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("writing the expressions as rules: %w", err)
	}
	dir, err := os.MkdirTemp("", "dashcheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "dashboard-expressions.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.Command(promtool, "check", "rules", "--lint=none", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err == nil {
		return nil, nil
	}
	if _, ok := err.(*exec.ExitError); !ok {
		return nil, fmt.Errorf("running %s: %w", promtool, err)
	}
	var problems []string
	for line := range strings.Lines(out.String()) {
		line = strings.TrimSpace(line)
		if !strings.Contains(line, "could not parse expression") && !strings.Contains(line, "parse error") {
			continue
		}
		for record, w := range where {
			if strings.Contains(line, `"`+record+`"`) {
				_, msg, _ := strings.Cut(line, "could not parse expression: ")
				line = fmt.Sprintf("%s: Prometheus cannot parse its expression: %s", w, msg)
				break
			}
		}
		problems = append(problems, line)
	}
	if len(problems) == 0 {
		return nil, fmt.Errorf("%s check rules failed on the dashboard's expressions:\n%s", promtool, out.String())
	}
	return problems, nil
}
