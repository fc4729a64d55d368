package plugin

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
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

// TestDecisionLineText: a decision line, passed as one argument, reads as
// the five strings did in "container %s: pool %s, CPUs %s%s, mems %s",
// with and without a shared part, whatever the verb.
func TestDecisionLineText(t *testing.T) {
	for _, st := range []struct{ pool, cpus, shared, mems string }{
		{"exclusive", "4-7,12", "", "0"},
		{"exclusive", "4-5", withSharedNote(state.ContainerState{WithShared: true, SharedCPUs: "0-3"}), "0-1"},
		{"shared", "0-3", "", ""},
	} {
		line := decisionLine{who: "ns/pod/c", pool: st.pool, cpus: st.cpus, shared: st.shared, mems: st.mems}
		want := fmt.Sprintf("container %s: pool %s, CPUs %s%s, mems %s", "ns/pod/c", st.pool, st.cpus, st.shared, st.mems)
		assert.Equal(t, want, fmt.Sprintf("%v", line))
		assert.Equal(t, want, fmt.Sprintf("%s", line))
	}
}
