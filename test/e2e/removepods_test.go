package e2e

// Not tagged e2e: remove_pods runs against a fake crictl, no runtime.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// removePods runs lib.sh's remove_pods with ids against a fake crictl
// (the script given, run for every crictl call) and returns its exit
// error and output.
func removePods(t *testing.T, crictl string, ids ...string) (string, error) {
	t.Helper()
	return runLib(t, crictl, "remove_pods", ids...)
}

// runLib runs lib.sh's function fn with args against a fake crictl and
// returns its output (ending "removed" when fn returned) and exit error.
func runLib(t *testing.T, crictl, fn string, args ...string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "crictl"), []byte("#!/bin/bash\n"+crictl), 0o755))
	// sleep is stubbed: the retries' pauses are not what is tested.
	require.NoError(t, os.WriteFile(filepath.Join(bin, "sleep"), []byte("#!/bin/sh\n"), 0o755))
	cmd := exec.Command("bash", append([]string{"-c", `set -eu; source lib.sh; "$@"; echo removed`, "bash", fn}, args...)...)
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRemovePodsDiesWhileThePodMayStay: remove_pods exists for crictl's
// connection to the runtime breaking (a pod left holding its CPUs, the
// next section failing for a reason it does not name). When crictl
// cannot say whether the pod is still there, because the connection is
// broken for that question too, the pod must count as still there: the
// test dies, naming it, rather than going on as if it were removed.
func TestRemovePodsDiesWhileThePodMayStay(t *testing.T) {
	broken := `echo 'rpc error: code = Unavailable desc = error reading server preface: use of closed network connection' >&2; exit 1`
	out, err := removePods(t, broken, "pod1")
	require.Error(t, err, "remove_pods went on: %s", out)
	assert.Contains(t, out, "removing pods pod1")
	assert.NotContains(t, out, "removed")
}

// TestRemovePodsTakesAGonePodAsRemoved: a pod the removal failed for that
// the runtime no longer has (removed by the first, failed-looking try) is
// removed; one it still has after three tries is fatal.
func TestRemovePodsTakesAGonePodAsRemoved(t *testing.T) {
	gone := `case "$1" in
rmp) echo 'rpc error: code = Unavailable desc = connection closed' >&2; exit 1 ;;
pods) echo pod2 ;;
inspectp) [ "$2" = pod2 ] && exit 0; echo "rpc error: code = NotFound desc = could not find pod $2" >&2; exit 1 ;;
esac`
	out, err := removePods(t, gone, "pod1")
	require.NoError(t, err, out)
	assert.Contains(t, out, "removed")

	out, err = removePods(t, gone, "pod1", "pod2")
	require.Error(t, err, "pod2 stays: %s", out)
	assert.Contains(t, out, "removing pods pod2: crictl rmp -f failed 3 times")
}

// TestStopPodRetriesThenDies: a sandbox stop that fails once (the broken
// connection) is retried; one that fails three times is fatal, naming the
// pod, instead of the scenario going on with the pod holding its CPUs.
func TestStopPodRetriesThenDies(t *testing.T) {
	count := t.TempDir() + "/n"
	once := `[ "$1" = stopp ] || exit 1; n=$(cat ` + count + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + count + `
[ "$n" -ge 1 ] && exit 0; echo 'rpc error: code = Unavailable desc = connection closed' >&2; exit 1`
	out, err := runLib(t, once, "stop_pod", "pod1")
	require.NoError(t, err, out)
	assert.Contains(t, out, "crictl stopp pod1 failed (attempt 1)")
	assert.Contains(t, out, "removed")

	out, err = runLib(t, `echo 'rpc error: code = Unavailable' >&2; exit 1`, "stop_pod", "pod1")
	require.Error(t, err, "stop_pod went on: %s", out)
	assert.Contains(t, out, "stopping pod pod1: crictl stopp failed 3 times")
	assert.NotContains(t, out, "removed")
}

// TestRemoveAllPodsNeedsAListing: a failed listing is not "no pods" (the
// pods would stay and hold their CPUs); the listed pods are removed.
func TestRemoveAllPodsNeedsAListing(t *testing.T) {
	out, err := runLib(t, `echo 'rpc error: code = Unavailable' >&2; exit 1`, "remove_all_pods")
	require.Error(t, err, "remove_all_pods went on: %s", out)
	assert.Contains(t, out, "crictl pods -q failed 3 times")

	log := t.TempDir() + "/log"
	listed := `echo "$@" >> ` + log + `; case "$1" in pods) printf 'p1\np2\n' ;; esac`
	out, err = runLib(t, listed, "remove_all_pods")
	require.NoError(t, err, out)
	calls, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Contains(t, string(calls), "rmp -f p1 p2")
}
