package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

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
