package cli

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestStatusOfADaemonThatWaitsForTheRuntime: while the daemon holds the
// state directory's lock and waits for the runtime, status says so (no
// state file yet: why, and what to do); once a state file exists, a line
// says the daemon waits (issue 43, item 5).
func TestStatusOfADaemonThatWaitsForTheRuntime(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	lock, err := state.TryLock(stateFile)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "daemon-status.json"), []byte(`{"runtime": {"state": "waiting-for-runtime", "since": "2026-03-01T08:00:00Z", "pid": 42, "socket": "/run/x.sock", "detail": "cannot reach the runtime at /run/x.sock; retrying"}}`), 0o600))
	code, _, errOut := run(t, "status", "--state-file", stateFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no state file "+stateFile+" yet: the daemon (pid 42) runs and has waited for the runtime since 2026-03-01T08:00:00Z: cannot reach the runtime at /run/x.sock; retrying. It writes the state file once")
	assert.NotContains(t, errOut, "is the plugin running")

	code, _, errOut = run(t, "audit", "--state-file", stateFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "has waited for the runtime", "audit reads the state file the same way")

	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(state.NewState()))
	store.Close()
	code, out, errOut := run(t, "status", "--state-file", stateFile)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "\nRuntime: waiting-for-runtime since 2026-03-01T08:00:00Z: cannot reach the runtime at /run/x.sock; retrying\n")
}

// fixedReady answers /readyz's checks as told.
type fixedReady struct{ runtime, writer, isolation error }

func (r fixedReady) RuntimeReady() error     { return r.runtime }
func (r fixedReady) StateWriterReady() error { return r.writer }
func (r fixedReady) IsolationReady() error   { return r.isolation }

// TestStatusAndExplainSayWhenTheStateWriterFails: a state file written
// before the daemon's writes began to fail looks current; status and
// explain print when it was written, and, when the node's config names
// the daemon's metricsAddress and the file is its stateFile, ask the
// daemon's /readyz (the real handler here) and warn that the file may be
// stale (review 59b, M4). A daemon that is ready, or a state file other
// than the config's, is not warned about.
func TestStatusAndExplainSayWhenTheStateWriterFails(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	st := state.NewState()
	st.Containers["8d1f5e0c9a7b6d4e"] = state.ContainerState{PodUID: "u", PodNamespace: "telco", PodName: "dpdk", Container: "fwd",
		Pool: "shared", CPUs: "7", Mems: "0", Rule: "annotation", RuleDetail: "pool.cpupool.dev/container.fwd=shared"}
	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(st))
	store.Close()

	failing := fixedReady{writer: errors.New("writing state failing since 2026-03-01T09:00:00Z (7 attempts): no space left on device")}
	var ready atomic.Pointer[fixedReady]
	ready.Store(&failing)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		readyz(readyChecks(*ready.Load(), nil))(w, r)
	}))
	defer srv.Close()
	cfgFile := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("stateFile: "+stateFile+"\nmetricsAddress: "+srv.Listener.Addr().String()+"\n"), 0o600))
	const warning = `says its state writer fails: "writing state failing since 2026-03-01T09:00:00Z (7 attempts): no space left on device"; this file may miss its decisions since`

	code, out, errOut := run(t, "status", "--config", cfgFile)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `\nState file: .*state.json, written at 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\nWARNING: the daemon \(http://127.0.0.1:\d+/readyz\) `+regexp.QuoteMeta(warning), out)
	code, out, errOut = run(t, "status", "--config", cfgFile, "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"stateWriterFailing": "writing state failing since 2026-03-01T09:00:00Z (7 attempts): no space left on device"`)
	assert.Regexp(t, `"written": "20\d\d-`, out)
	code, out, errOut = run(t, "explain", "telco/dpdk", "--config", cfgFile, "--sysfs-root", fixture.Root(t, "desktop-8c16t"), "--proc-root", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, warning)
	code, out, errOut = run(t, "explain", "telco/dpdk", "--json", "--config", cfgFile, "--sysfs-root", fixture.Root(t, "desktop-8c16t"), "--proc-root", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"stateWriterFailing": "writing state failing since`)

	// Another state file than the daemon's: its writer says nothing of it.
	other := filepath.Join(dir, "copy.json")
	data, err := os.ReadFile(stateFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(other, data, 0o600))
	code, out, errOut = run(t, "status", "--config", cfgFile, "--state-file", other)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "\nState file: "+other+", written at ")
	assert.NotContains(t, out, "WARNING")

	// A ready daemon: no warning.
	ready.Store(&fixedReady{})
	code, out, errOut = run(t, "status", "--config", cfgFile)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "WARNING")
	code, out, _ = run(t, "status", "--config", cfgFile, "--json")
	require.Equal(t, 0, code)
	assert.NotContains(t, out, "stateWriterFailing")
}

// TestReadyzURL: the daemon is asked where it listens; an unspecified
// host on loopback.
func TestReadyzURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:9464": "http://127.0.0.1:9464/readyz?verbose",
		":9464":          "http://127.0.0.1:9464/readyz?verbose",
		"0.0.0.0:9464":   "http://127.0.0.1:9464/readyz?verbose",
		"[::]:9464":      "http://127.0.0.1:9464/readyz?verbose",
		"[fd00::1]:9464": "http://[fd00::1]:9464/readyz?verbose",
		"nonsense":       "",
	} {
		assert.Equal(t, want, readyzURL(addr), addr)
	}
}

// TestStatusShowsHotRemovedHeldCPUs: a held CPU that is not online is
// offline whether or not it is still present (hot-removed): audit, the
// daemon's cpupool_exclusive_cpu_clean and cpupool_offline_held_cpus say
// so, and docs/configuration.md ("CPU hotplug") says status reports it.
// status took only present minus online, and said nothing of held CPUs
// 4-6 the node no longer has. It lists them when the sysfs root is the
// state's node (--sysfs-root, whose help says so, or the config's own
// state file); a state file shown against this machine's / by default may
// be another node's, whose held CPUs this one may lack: not listed then.
func TestStatusShowsHotRemovedHeldCPUs(t *testing.T) {
	sys := t.TempDir()
	cpuDir := filepath.Join(sys, "sys/devices/system/cpu")
	require.NoError(t, os.MkdirAll(cpuDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "online"), []byte("0-3\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "present"), []byte("0-3\n"), 0o644))
	stateFile, proc := auditNode(t, cpuset.New(0, 1)) // holds 4-5 (fwd) and 6 (old, stopped)

	code, out, errOut := run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--cgroup-root", sys, "--sample", "1ms")
	require.Equal(t, 3, code, out+errOut)
	require.Contains(t, out, "not present")

	code, out, errOut = run(t, "status", "--state-file", stateFile, "--sysfs-root", sys)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Offline CPUs: 4-6\n", out)
	assert.Contains(t, out, "CPUs 4-5 of telco/dpdk/fwd are offline")
	assert.Contains(t, out, "CPU 6 of telco/dpdk/old (stopped, held) is offline")

	// The config's own state file: the config's sysfs root is its node.
	cfg := writeFile(t, "sysfsRoot: "+sys+"\nstateFile: "+stateFile+"\n")
	code, out, errOut = run(t, "status", "--config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Offline CPUs: 4-6\n", out)

	// Another file shown against this machine's /: not this node's CPUs.
	code, out, errOut = run(t, "status", "--state-file", stateFile, "--config", writeFile(t, "reservedCPUs: \"0\"\n"))
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "of telco/dpdk/fwd", "this machine is not the state's node:\n%s", out)
}
