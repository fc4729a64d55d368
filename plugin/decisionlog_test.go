package plugin

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedDecisions is a DecisionLog that keeps the lines it is given,
// made as logrus makes a message (fmt.Sprintf).
type recordedDecisions struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordedDecisions) Infof(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recordedDecisions) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// TestCreationLineByDefaultAndThroughADecisionLog: a creation's line is
// the same text, at info, in the plugin's log by default and through the
// decision log the daemon gives it (which formats it off the reply's
// path, logsink.Deferred), and then not in the plugin's log a second time.
func TestCreationLineByDefaultAndThroughADecisionLog(t *testing.T) {
	const want = "container default/a/c: pool exclusive, CPUs 1, mems 0"

	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vm2, statePath(f))
	_, _, err := f.createContainer(exclusivePod(f, "a"), "c", 1000)
	require.NoError(t, err)
	assert.Contains(t, rp.log.String(), `level=info msg="`+want+`"`)

	f = newFakeRuntime(t, false)
	decisions := &recordedDecisions{}
	rp = startPluginWith(t, f, vm2, statePath(f), func(rp *runningPlugin) { rp.p.LogDecisionsTo(decisions) })
	_, _, err = f.createContainer(exclusivePod(f, "a"), "c", 1000)
	require.NoError(t, err)
	assert.Equal(t, []string{want}, decisions.all())
	assert.NotContains(t, rp.log.String(), "container default/a/c: pool", "logged once, through the decision log")
}
