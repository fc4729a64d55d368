// Package proflabeltest reads the pprof labels of running goroutines, for
// tests that a goroutine carries the label a profile is split by
// (internal/proflabel).
package proflabeltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"
)

// LabelsOf returns the labels of each goroutine now running a function
// whose name contains fn (as a stack trace names it, e.g.
// "(*stateWriter).run"), from the goroutine profile: one map per group of
// goroutines with the same stack and labels; an empty map for a goroutine
// without labels.
func LabelsOf(fn string) ([]map[string]string, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return nil, fmt.Errorf("writing the goroutine profile: %w", err)
	}
	var out []map[string]string
	// debug=1: a record per stack and label set, separated by blank
	// lines: "N @ addresses", then "# labels: {...}" when it has some,
	// then a "#\taddress\tfunction+offset\tfile:line" line per frame.
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		labels, found := map[string]string{}, false
		for _, line := range strings.Split(rec, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				if err := json.Unmarshal([]byte(l), &labels); err != nil {
					return nil, fmt.Errorf("reading the labels %q: %w", l, err)
				}
				continue
			}
			if strings.HasPrefix(line, "#\t") && strings.Contains(line, fn) {
				found = true
			}
		}
		if found {
			out = append(out, labels)
		}
	}
	return out, nil
}

// WaitLabelsOf waits up to a few seconds for a goroutine running fn to
// appear and returns LabelsOf(fn).
func WaitLabelsOf(fn string) ([]map[string]string, error) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := LabelsOf(fn)
		if err != nil || len(got) > 0 || time.Now().After(deadline) {
			return got, err
		}
	}
}
