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

// notLiveness are routes of probePaths no liveness probe may GET: /readyz
// fails while the plugin is merely not ready (before the runtime's first
// Synchronize, while its state writer fails), and a liveness probe on it
// restarts a healthy plugin then, which makes it no readier. The schema
// refuses them for probes.liveness.path too.
var notLiveness = []string{"/readyz"}

// checkProbePath refuses a probe's path the daemon does not serve, and a
// liveness probe's on a route of notLiveness. probe is "liveness" or
// "readiness". The query (/readyz?verbose) is no part of the route.
func checkProbePath(probe, path string) error {
	route, _, _ := strings.Cut(path, "?")
	if !slices.Contains(probePaths, route) {
		return fmt.Errorf("GETs %q, which the daemon does not serve (it serves %s): every probe gets 404; set the probe's path (the chart's probes.*.path)", path, strings.Join(probePaths, ", "))
	}
	if probe == "liveness" && slices.Contains(notLiveness, route) {
		return fmt.Errorf("GETs %q, the daemon's readiness: it fails while the plugin is merely not ready (before the runtime's first Synchronize, while the state file cannot be written), and the kubelet would restart a healthy plugin then; use /healthz (the chart's probes.liveness.path), and %s for readiness only", path, route)
	}
	return nil
}
