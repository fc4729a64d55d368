package handlerclock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// ServeHTTP answers the Summary as JSON: of every call the ring holds, or
// with ?since=N (a Summary's seq taken earlier) of the calls after it, so
// that a benchmark reads its measured rounds alone.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var since uint64
	if v := req.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("since=%q: not a call count; give the seq of an earlier summary, e.g. since=0", v), http.StatusBadRequest)
			return
		}
		since = n
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(r.Summary(since)) //nolint:errcheck // the client went away
}
