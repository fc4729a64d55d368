package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPprofOffByDefault: without --pprof-address the daemon serves no
// profile: its only listener, the metrics address, does not route
// /debug/pprof/ (the profiles show the process's memory).
func TestPprofOffByDefault(t *testing.T) {
	srv := httptest.NewServer(metricsHandler(newIdlePlugin(t), nil))
	defer srv.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		code, _ := get(t, srv.URL+path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
}

// TestPprofServedOnLoopback: --pprof-address 127.0.0.1:PORT serves the
// index, the named profiles and a CPU profile.
func TestPprofServedOnLoopback(t *testing.T) {
	stop, where, err := servePprof("127.0.0.1:0", quietLog())
	require.NoError(t, err)
	defer stop()
	code, body := get(t, "http://"+where+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "heap")
	assert.Contains(t, body, "block")
	code, _ = get(t, "http://"+where+"/debug/pprof/heap?debug=1")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, "http://"+where+"/debug/pprof/profile?seconds=1")
	assert.Equal(t, http.StatusOK, code)
}

// TestPprofServedOnUnixSocket: unix:PATH serves the same on a socket only
// its owner may open, and replaces a socket an earlier process left.
func TestPprofServedOnUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pprof.sock")
	stale, err := net.Listen("unix", path)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // killed: the socket file stays
	stop, _, err := servePprof("unix:"+path, quietLog())
	require.NoError(t, err)
	defer stop()
	cl := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := cl.Get("http://pprof/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "goroutine")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestPprofRefusesOtherAddresses: an address other hosts could reach, or
// one that is not an address, is refused at start, saying what to give.
func TestPprofRefusesOtherAddresses(t *testing.T) {
	for _, addr := range []string{":6060", "0.0.0.0:6060", "10.1.2.3:6060", "[::]:6060", "example.com:6060", "6060", "unix:"} {
		_, _, err := servePprof(addr, quietLog())
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "--pprof-address", addr)
	}
	code, out, _ := run(t, "run", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "-pprof-address")
}

func quietLog() *logrus.Logger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return log
}

// TestPprofKeepsALiveSocket: unix:PATH naming a socket another process
// still listens on (a second daemon, or a mistyped path such as the
// runtime's own socket) is an error at start, and that socket is left in
// place: only a socket no one listens on is an earlier process's to
// replace.
func TestPprofKeepsALiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.sock")
	live, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer live.Close()
	_, _, err = servePprof("unix:"+path, quietLog())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--pprof-address")
	assert.Contains(t, err.Error(), "listens")
	conn, err := net.Dial("unix", path)
	require.NoError(t, err, "the other process's socket was removed")
	conn.Close()
}
