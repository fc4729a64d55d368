package main

import (
	"os"
	"strings"
	"testing"
)

// TestAllFeaturesRows: issue 45's rows are printed for both modes, the
// benchmark's process and the real binary's own, each figure against its
// target, and the process mode's rows carry the daemon's own figures and
// say where the no-op ran.
func TestAllFeaturesRows(t *testing.T) {
	in, err := os.Open("testdata/allfeatures.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out strings.Builder
	printTable(in, &out)
	table := out.String()
	for _, want := range [][]string{
		{"all isolation features, 384 CPUs, 0 running: added median (paired)", "69 µs (NOT met)", "≤ 30 µs"},
		{"no-op / nri-cpupool median; handler mean; allocations per round trip", "151 / 233 µs; 66 µs; 236", "allocations flat"},
		{"all isolation features, real binary, 384 CPUs, 0 running: added median (paired)", "396 µs (NOT met)", "≤ 30 µs"},
		{"added at p99 (nri-cpupool's p99 less the no-op's)", "9497 µs (NOT met)", "≤ 150 µs"},
		{"no-op / nri-cpupool median; no-op p99; the daemon's handler mean", "151 / 548 µs; 331 µs; 92 µs"},
		{"allocations: runtime side per round trip; the daemon per round", "109; 985", "flat"},
		{"the daemon: GC cycles per 1,000 round trips; heap goal; CPU per round", "50; 8.6 MiB; 2500 µs"},
		{"the runtimes' and the no-op's process: scheduler latency p99", "197 µs"},
		{"real binary, 1024 CPUs, 5000 running: added median (paired)", "22 µs (met)", "≤ 30 µs"},
		{"added at p99 (nri-cpupool's p99 less the no-op's)", "-40 µs (noise: the no-op's p99 is higher)"},
		{"no-op (its own process) / nri-cpupool median; no-op p99; the daemon's handler mean", "151 / 548 µs; 331 µs; 92 µs"},
		{"nri-cpupool's allocations per creation, 384 CPUs, 0 running: handler + state write", "72 + 174 = 246 (met)", "flat (≤ 1.25× of 0 running)"},
		{"nri-cpupool's allocations per creation, 384 CPUs, 5000 running: handler + state write", "73 + 182 = 255 (met)", "flat"},
		{"nri-cpupool's allocations per creation, 384 CPUs, 1000 running: handler + state write", "72 + 9000 = 9072 (NOT met)", "flat"},
	} {
		if !containsRow(table, want) {
			t.Errorf("no row with %q in:\n%s", want, table)
		}
	}
}

// containsRow tells whether a line of table holds every part, in order.
func containsRow(table string, parts []string) bool {
	for _, line := range strings.Split(table, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestPluginRSSTargets: the peak RSS rows print the target each has (40 MiB
// at 500 and at 1,000 containers on 384 CPUs without DRA), and none
// beside 5,000 containers on 1,024 CPUs or with DRA on, which have none.
func TestPluginRSSTargets(t *testing.T) {
	var in strings.Builder
	for _, prefix := range []string{"", "dra/"} {
		for _, n := range []string{"500", "1000", "5000"} {
			in.WriteString("BenchmarkPluginRSS/" + prefix + "containers=" + n + "-2  1  100 ns/op  30.5 anon-MiB  17.0 file-MiB  25.0 idle-peak-RSS-MiB  47.5 peak-RSS-MiB\n")
		}
	}
	var out strings.Builder
	printTable(strings.NewReader(in.String()), &out)
	want := map[string]string{
		"plugin process peak RSS, 500 containers, 384 CPUs":            "≤ 40 MiB",
		"plugin process peak RSS, 1000 containers, 384 CPUs":           "≤ 40 MiB",
		"plugin process peak RSS, 5000 containers, 1,024 CPUs":         "",
		"plugin process peak RSS, 500 containers, 384 CPUs, DRA on":    "",
		"plugin process peak RSS, 1000 containers, 384 CPUs, DRA on":   "",
		"plugin process peak RSS, 5000 containers, 1,024 CPUs, DRA on": "",
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		what, rest, ok := strings.Cut(line, "  ")
		if !ok || !strings.HasPrefix(what, "plugin process peak RSS") {
			continue
		}
		rows++
		target, known := want[what]
		if !known {
			t.Errorf("unexpected row %q", line)
			continue
		}
		value := "47.5 MiB (idle 25.0; 30.5+17.0)"
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, value) {
			t.Errorf("row %q: value is not %q", line, value)
			continue
		}
		if got := strings.TrimSpace(strings.TrimPrefix(rest, value)); got != target {
			t.Errorf("row %q: target %q, want %q", what, got, target)
		}
	}
	if rows != len(want) {
		t.Errorf("%d peak RSS rows, want %d:\n%s", rows, len(want), out.String())
	}
}
