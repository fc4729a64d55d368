package cli

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRuntimeMetricsServed: the profiles' address answers the runtime's
// GC cycles, heap goal and GC CPU as numbers, and the scheduler's latency
// histogram as buckets with counts, which grow as goroutines are woken.
func TestRuntimeMetricsServed(t *testing.T) {
	stop, where, err := servePprof("127.0.0.1:0", quietLog())
	require.NoError(t, err)
	defer stop()
	schedCount := func() uint64 {
		code, body := get(t, "http://"+where+"/debug/runtime-metrics")
		require.Equal(t, http.StatusOK, code)
		var total uint64
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			f := strings.Fields(line)
			require.NotEmpty(t, f, "an empty line in %q", body)
			seen[f[0]] = true
			switch f[0] {
			case "/sched/latencies:seconds":
				require.Len(t, f, 4, "a histogram line is NAME LOW HIGH COUNT: %q", line)
				lo, err := strconv.ParseFloat(f[1], 64)
				require.NoError(t, err)
				hi, err := strconv.ParseFloat(f[2], 64)
				require.NoError(t, err)
				assert.Less(t, lo, hi, line)
				n, err := strconv.ParseUint(f[3], 10, 64)
				require.NoError(t, err)
				assert.NotZero(t, n, "a bucket that counted nothing is left out: %q", line)
				total += n
			default:
				require.Len(t, f, 2, "a counter line is NAME VALUE: %q", line)
				_, err := strconv.ParseFloat(f[1], 64)
				require.NoError(t, err, line)
			}
		}
		for _, name := range runtimeMetricNames {
			assert.True(t, seen[name], "%s missing from %q", name, body)
		}
		return total
	}
	before := schedCount()
	for i := 0; i < 100; i++ {
		done := make(chan struct{})
		go func() { close(done) }()
		<-done
		time.Sleep(10 * time.Microsecond)
	}
	assert.Greater(t, schedCount(), before, "the scheduler's latency histogram counts the goroutines woken meanwhile")
}
