package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/handlerclock"
	"github.com/cpupool/nri-cpupool/plugin"
)

// TestHandlerClocksOffByDefault: without --handler-clocks the metrics
// address serves no creation clocks, as before the diagnostic.
func TestHandlerClocksOffByDefault(t *testing.T) {
	srv := httptest.NewServer(metricsHandler(newIdlePlugin(t), nil))
	defer srv.Close()
	code, _ := get(t, srv.URL+handlerClocksPath)
	assert.Equal(t, http.StatusNotFound, code)
}

// TestHandlerClocksServed: with the plugin's creations timed, the metrics
// address serves their summary, phase by phase, as JSON.
func TestHandlerClocksServed(t *testing.T) {
	p := newIdlePlugin(t)
	p.TimeCreations(plugin.NewCreationClocks())
	srv := httptest.NewServer(metricsHandler(p, nil))
	defer srv.Close()
	code, body := get(t, srv.URL+handlerClocksPath+"?since=0")
	require.Equal(t, http.StatusOK, code)
	var s handlerclock.Summary
	require.NoError(t, json.Unmarshal([]byte(body), &s))
	assert.Equal(t, 0, s.Calls)
	require.NotEmpty(t, s.Phases)
	assert.Equal(t, "input", s.Phases[0].Name)
	assert.Equal(t, "total", s.Phases[len(s.Phases)-1].Name)
}

// TestHandlerClocksNeedTheMetricsAddress: --handler-clocks without a
// metrics address, where its summary is served, stops run with what to
// set.
func TestHandlerClocksNeedTheMetricsAddress(t *testing.T) {
	code, _, errOut := run(t, "run", "--config", writeFile(t, ""), "--handler-clocks")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--handler-clocks: the summary is served on metricsAddress's /debug/handler-clocks, and metricsAddress is not set; set it in ")
}
