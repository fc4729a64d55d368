package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostFilesRefusedStatIgnoresKernelManagedIRQs: the health row's "Host
// files refused" stat turns orange at 1, so it must count what needs a
// look, as the alerts do: CpupoolHostFilesRefused leaves out owner irq
// (kernel-managed IRQs, NVMe's, are refused for as long as the node runs)
// and CpupoolHostFilesNotRestored counts a refused restore of any owner.
// The stat's expression, as Grafana sends it, is run by promtool on three
// nodes' series, each alone, as an alert that fires at the threshold.
func TestHostFilesRefusedStatIgnoresKernelManagedIRQs(t *testing.T) {
	bin := promtool(t)
	res, err := Check(shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, q := range res.Queries {
		if strings.Contains(q.Where, `"Host files refused"`) {
			expr = Interpolate(q.Expr, res.Variables)
		}
	}
	if expr == "" {
		t.Fatal(`no "Host files refused" panel in the shipped dashboard`)
	}
	dir := t.TempDir()
	rules := "groups:\n- name: stat\n  rules:\n  - alert: StatOrange\n    expr: '(" + strings.ReplaceAll(expr, "'", "''") + ") >= 1'\n"
	series := func(name, owner, values string) string {
		return "      - series: '" + name + `{instance="node-a:9464",job="nri-cpupool",owner="` + owner + `"}'` + "\n        values: '" + values + "'\n"
	}
	test := func(name, input, want string) string {
		return "  - name: '" + name + "'\n    interval: 1m\n    input_series:\n" + input +
			"    alert_rule_test:\n      - eval_time: 5m\n        alertname: StatOrange\n        exp_alerts: " + want + "\n"
	}
	orange := "[{exp_labels: {}}]"
	tests := "rule_files: [stat.rules.yaml]\ntests:\n" +
		test("kernel-managed IRQs refused: green",
			series("cpupool_host_files_refused", "irq", "24x10")+series("cpupool_host_files_restore_refused", "irq", "0x10"), "[]") +
		test("housekeeping refused: orange",
			series("cpupool_host_files_refused", "housekeeping", "3x10")+series("cpupool_host_files_refused", "irq", "24x10"), orange) +
		test("IRQs not restored: orange",
			series("cpupool_host_files_refused", "irq", "29x10")+series("cpupool_host_files_restore_refused", "irq", "5x10"), orange)
	if err := os.WriteFile(filepath.Join(dir, "stat.rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat.test.yaml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "stat.test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the stat's expression %s:\n%s", expr, out)
	}
}
