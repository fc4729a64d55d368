package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditAgePanelShowsEachNodesAge: the "Audit age" panel is where a
// node whose audit stopped (CpupoolAuditStale) is seen. It must show each
// node's age: one series per node, so that a fresh node does not hide a
// stale one (time() - max(...) showed only the freshest node's). The
// panel's expression, as Grafana sends it with $instance at All, is run
// by promtool as a recording rule on two nodes: node a's audit stopped at
// minute 1, node b's runs each minute.
func TestAuditAgePanelShowsEachNodesAge(t *testing.T) {
	bin := promtool(t)
	res, err := Check(shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, q := range res.Queries {
		if strings.Contains(q.Where, `"Audit age"`) {
			expr = Interpolate(q.Expr, res.Variables)
		}
	}
	if expr == "" {
		t.Fatal(`no "Audit age" panel in the shipped dashboard`)
	}
	dir := t.TempDir()
	rules := "groups:\n- name: panel\n  rules:\n  - record: panel:audit_age\n    expr: '" + strings.ReplaceAll(expr, "'", "''") + "'\n"
	series := func(instance, values string) string {
		return "      - series: 'cpupool_audit_timestamp_seconds{instance=\"" + instance + "\",job=\"nri-cpupool\"}'\n        values: '" + values + "'\n"
	}
	sample := func(instance string, value string) string {
		return "          - labels: 'panel:audit_age{instance=\"" + instance + "\",job=\"nri-cpupool\"}'\n            value: " + value + "\n"
	}
	tests := "rule_files: [panel.rules.yaml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		series("node-a:9464", "0 60x20") + series("node-b:9464", "0+60x20") +
		"    promql_expr_test:\n      - expr: panel:audit_age\n        eval_time: 20m\n        exp_samples:\n" +
		sample("node-a:9464", "1140") + sample("node-b:9464", "0")
	if err := os.WriteFile(filepath.Join(dir, "panel.rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "panel.test.yaml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "panel.test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the panel's expression %s:\n%s", expr, out)
	}
}
