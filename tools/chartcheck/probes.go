package main

import (
	"fmt"
	"slices"
	"strings"
)

// probePaths are the paths the daemon serves at its metrics address
// whatever its config (metricsHandler in cmd/nri-cpupool/internal/cli,
// which chartcheck cannot import) and what the chart's values.schema.json
// takes for probes.*.path, refusing any other at helm install where
// chartcheck, run in CI on the chart's ci/ values, cannot;
// TestProbePathsAreWhatTheDaemonServes keeps the three alike. Any other
// path answers 404, so a probe on it always fails: liveness restarts the
// plugin for ever, readiness never passes.
var probePaths = []string{"/metrics", "/healthz", "/readyz"}

// checkProbePath refuses a probe's path the daemon does not serve. The
// query (/readyz?verbose) is no part of the route.
func checkProbePath(path string) error {
	route, _, _ := strings.Cut(path, "?")
	if slices.Contains(probePaths, route) {
		return nil
	}
	return fmt.Errorf("GETs %q, which the daemon does not serve (it serves %s): every probe gets 404; set the probe's path (the chart's probes.*.path)", path, strings.Join(probePaths, ", "))
}
