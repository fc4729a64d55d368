package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestReadyzFollowsNoRedirect (review 59e): 422eb7a stopped following
// redirects (CheckRedirect), but no test guarded it. Whatever listens at
// metricsAddress answering 302 to another server that says its state
// writer fails must not make status warn: the daemon did not say so.
func TestReadyzFollowsNoRedirect(t *testing.T) {
	var asked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "[-]state-writer failed: said elsewhere")
	}))
	defer elsewhere.Close()
	port := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/readyz?verbose", http.StatusFound))
	defer port.Close()
	assert.Empty(t, stateWriterFailing(readyzURL(port.Listener.Addr().String())), "a redirect's target was taken for the daemon")
	assert.Zero(t, asked.Load(), "the redirect was followed")
}

// TestReadyzAnswerIsBounded (review 59e): what the port answers is kept
// to 1 KiB, and printed quoted: a terminal escape in it reaches the
// operator's terminal escaped.
func TestReadyzAnswerIsBounded(t *testing.T) {
	long := "\x1b[2J" + strings.Repeat("x", 5000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "[-]state-writer failed: "+long)
	}))
	defer srv.Close()
	why := stateWriterFailing(readyzURL(srv.Listener.Addr().String()))
	assert.True(t, strings.HasSuffix(why, "… (5004 bytes)"), "the answer is not bounded, or its size not said: %q", why)
	assert.LessOrEqual(t, len(why), maxAnswer+len("… (5004 bytes)"), "the answer is not bounded")
	var out bytes.Buffer
	writeFreshness(&out, "/s", stateFreshness{Written: time.Unix(0, 0), WriterFailing: why, Readyz: "http://x/readyz?verbose"})
	assert.NotContains(t, out.String(), "\x1b", "a terminal escape is printed raw")
	assert.Less(t, out.Len(), 1024, "the printed line is not bounded")
	// é is bytes 255 and 256: the cut at 256 would split it.
	assert.Equal(t, strings.Repeat("x", 255)+"… (258 bytes)", boundedAnswer(strings.Repeat("x", 255)+"é"+"y"), "cut on a character")
	t.Logf("%s", out.String())
}

// TestReadyzNeverGoesThroughAProxy (review 59d): status and explain
// ask the daemon's /readyz at metricsAddress. A node address there
// ("10.0.0.5:9464", the daemon listening on one interface) with the
// operator's shell exporting HTTP_PROXY (as nodes behind a corporate proxy
// do) sends the question, and the node's address, to the proxy host: the
// default transport's ProxyFromEnvironment skips only loopback.
//
// net/http reads the proxy variables once per process, so the test runs
// itself in a fresh process: another test of the package may have read
// them first.
func TestReadyzNeverGoesThroughAProxy(t *testing.T) {
	if os.Getenv("RV59D_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReadyzNeverGoesThroughAProxy$", "-test.v")
		cmd.Env = append(os.Environ(), "RV59D_CHILD=1")
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		assert.NoError(t, err, "the child test failed")
		return
	}
	var asked atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		t.Logf("proxy asked: %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	stateWriterFailing(readyzURL("192.0.2.10:9464"))
	assert.Zero(t, asked.Load(), "the daemon's health question went to the proxy %s", proxy.URL)
}
