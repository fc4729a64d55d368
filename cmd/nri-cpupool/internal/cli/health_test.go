package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// newIdlePlugin is a plugin as run makes it, not connected to a runtime.
func newIdlePlugin(t *testing.T) *plugin.Plugin {
	t.Helper()
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SysfsRoot = fixture.Root(t, "desktop-8c16t")
	cfg.StateFile, cfg.CgroupRoot, cfg.ProcRoot = filepath.Join(dir, "state.json"), dir, filepath.Join(dir, "proc")
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// get answers a GET of url: the status and the body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestMetricsAddressServesHealth: the metrics address serves /healthz and
// /readyz beside /metrics, for the DaemonSet's probes (issue 43, item 4;
// both answered 404). A plugin not connected to a runtime is alive and
// not ready, and says why.
func TestMetricsAddressServesHealth(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	stop, err := serveMetrics(addr, newIdlePlugin(t), nil)
	require.NoError(t, err)
	defer stop()

	code, body := get(t, "http://"+addr+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	code, body = get(t, "http://"+addr+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.True(t, strings.HasPrefix(body, "runtime: "), body)
	code, _ = get(t, "http://"+addr+"/metrics")
	assert.Equal(t, http.StatusOK, code)
}

// probe answers a request to h: the status and the body.
func probe(h http.Handler, target string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String()
}

// TestReadyzAnswersEachState: /readyz is 200 "ok" when the checks that
// count pass, and 503 naming each failed one; an informational check (the
// DRA driver's) never fails it; ?verbose lists every check.
func TestReadyzAnswersEachState(t *testing.T) {
	pass := func() error { return nil }
	fail := func(why string) func() error { return func() error { return errors.New(why) } }
	for _, tc := range []struct {
		name          string
		runtime, disk func() error
		dra           func() error // nil: DRA off
		code          int
		body, verbose string
	}{
		{name: "ready", runtime: pass, disk: pass, code: 200, body: "ok",
			verbose: "[+]runtime ok\n[+]state-writer ok\nreadyz check passed\n"},
		{name: "no runtime", runtime: fail("cannot reach the runtime at /var/run/nri/nri.sock"), disk: pass, code: 503,
			body:    "runtime: cannot reach the runtime at /var/run/nri/nri.sock\n",
			verbose: "[-]runtime failed: cannot reach the runtime at /var/run/nri/nri.sock\n[+]state-writer ok\nreadyz check failed\n"},
		{name: "state writer failing", runtime: pass, disk: fail("writing state failing"), code: 503,
			body:    "state-writer: writing state failing\n",
			verbose: "[+]runtime ok\n[-]state-writer failed: writing state failing\nreadyz check failed\n"},
		{name: "both", runtime: fail("stopped"), disk: fail("disk"), code: 503,
			body:    "runtime: stopped\nstate-writer: disk\n",
			verbose: "[-]runtime failed: stopped\n[-]state-writer failed: disk\nreadyz check failed\n"},
		{name: "DRA retrying", runtime: pass, disk: pass, dra: fail("retrying"), code: 200, body: "ok",
			verbose: "[+]runtime ok\n[+]state-writer ok\n[!]dra retrying (informational: readiness does not depend on it)\nreadyz check passed\n"},
		{name: "DRA registered", runtime: pass, disk: pass, dra: pass, code: 200, body: "ok",
			verbose: "[+]runtime ok\n[+]state-writer ok\n[+]dra ok\nreadyz check passed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := []readyCheck{{name: "runtime", check: tc.runtime}, {name: "state-writer", check: tc.disk}}
			if tc.dra != nil {
				checks = append(checks, readyCheck{name: "dra", check: tc.dra, informational: true})
			}
			h := readyz(checks)
			code, body := probe(h, "/readyz")
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.body, body)
			code, body = probe(h, "/readyz?verbose")
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.verbose, body)
		})
	}
}

// TestDRAReadinessIsRegistered: the driver's check passes once the kubelet
// confirmed its registration, and says the state, since when and why
// otherwise.
func TestDRAReadinessIsRegistered(t *testing.T) {
	require.NoError(t, draReady(dracore.Status{State: dracore.StateRegistered}))
	since := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	err := draReady(dracore.Status{State: dracore.StateWaitingForKubelet, Since: since, Detail: "/var/lib/kubelet/plugins_registry does not exist"})
	require.Error(t, err)
	assert.Equal(t, "waiting-for-kubelet since 2026-12-05T04:00:00Z: /var/lib/kubelet/plugins_registry does not exist", err.Error())
	assert.EqualError(t, draReady(dracore.Status{State: dracore.StateServing}), "serving")
}

// fakeDriver is a DRA driver in a given state.
type fakeDriver struct{ status dracore.Status }

func (fakeDriver) Collector() prometheus.Collector           { return prometheus.NewRegistry() }
func (d fakeDriver) Status() dracore.Status                  { return d.status }
func (fakeDriver) Serve(ctx context.Context) <-chan struct{} { return nil }

// TestMetricsHandlerReportsTheDriver: with the DRA driver on, /readyz's
// verbose answer shows its state, and a driver that waits for the kubelet
// leaves the daemon's readiness to the plugin's checks.
func TestMetricsHandlerReportsTheDriver(t *testing.T) {
	h := metricsHandler(newIdlePlugin(t), fakeDriver{dracore.Status{State: dracore.StateWaitingForKubelet}})
	code, body := probe(h, "/readyz?verbose")
	assert.Equal(t, http.StatusServiceUnavailable, code, "no runtime")
	assert.Contains(t, body, "[-]runtime failed: not connected to the runtime yet\n")
	assert.Contains(t, body, "[+]state-writer ok\n")
	assert.Contains(t, body, "[+]isolation ok\n", "the journal of host files opened")
	assert.Contains(t, body, "[!]dra waiting-for-kubelet (informational")
	code, body = probe(h, "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
}

// TestUnopenableHostFilesJournalLeavesTheNodeReady: a node
// whose journal of host files' originals cannot be opened (an I/O error, a
// damaged journal on a read-only state directory) still pins containers
// and remembers them, what /readyz stands for. With the DaemonSets'
// maxSurge 1 / maxUnavailable 0, on the host network the new pod's probe
// reaches the old process: an unready old build would stall the rollout
// that fixes it, on every node, tuned or not. The isolation check is
// therefore shown by ?verbose and fails nothing, like dra;
// CpupoolHostFilesJournalUnavailable alerts on it instead.
func TestUnopenableHostFilesJournalLeavesTheNodeReady(t *testing.T) {
	journal := errors.New("opening /var/lib/nri-cpupool/host-originals.json: input/output error")
	h := readyz(readyChecks(fixedReady{isolation: journal}, nil))
	code, body := probe(h, "/readyz")
	assert.Equal(t, http.StatusOK, code, "an unopenable journal made the node unready: %s", body)
	assert.Equal(t, "ok", body)
	code, body = probe(h, "/readyz?verbose")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "[+]runtime ok\n[+]state-writer ok\n"+
		"[!]isolation opening /var/lib/nri-cpupool/host-originals.json: input/output error (informational: readiness does not depend on it)\n"+
		"readyz check passed\n", body)

	// A check that counts still fails the node beside it.
	h = readyz(readyChecks(fixedReady{writer: errors.New("disk"), isolation: journal}, nil))
	code, body = probe(h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "state-writer: disk\n", body)
}
