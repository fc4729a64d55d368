package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	assert.Equal(t, 1024, len(why), "the answer is not bounded to 1 KiB")
	var out bytes.Buffer
	writeFreshness(&out, "/s", stateFreshness{Written: time.Unix(0, 0), WriterFailing: why, Readyz: "http://x/readyz?verbose"})
	assert.NotContains(t, out.String(), "\x1b", "a terminal escape is printed raw")
	assert.Less(t, out.Len(), 1024, "the printed line is not bounded")
	t.Logf("%s", out.String())
}
