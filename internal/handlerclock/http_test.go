package handlerclock

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeHTTPSince: the summary as JSON, of every call or of those
// after since; a since that is not a number is a 400 that says what to
// give.
func TestServeHTTPSince(t *testing.T) {
	r, err := NewRecorder("a", "b")
	require.NoError(t, err)
	for range 7 {
		r.add(record{})
	}
	get := func(query string) (*httptest.ResponseRecorder, Summary) {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/handler-clocks"+query, nil))
		var s Summary
		if w.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &s))
		}
		return w, s
	}
	w, all := get("")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, 7, all.Calls)
	assert.Equal(t, uint64(7), all.Seq)
	assert.Equal(t, []string{"a", "b", "total"}, []string{all.Phases[0].Name, all.Phases[1].Name, all.Phases[2].Name})
	_, some := get("?since=4")
	assert.Equal(t, 3, some.Calls)
	w, _ = get("?since=x")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), `since="x": not a call count`)
}
