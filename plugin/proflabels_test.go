package plugin

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/internal/proflabel/proflabeltest"
)

// TestGoroutinesCarryProfileLabels: a CPU profile of the daemon splits its
// CPU by what runs (internal/proflabel, docs/commands.md "Profiling the
// daemon"). The CreateContainer handler carries nri=CreateContainer while
// it decides; the sandbox pinner, which the first handler to ask for a pin
// starts (Synchronize here), carries worker=sandbox-pinner and not the
// handler's label it would inherit; the state writer carries
// worker=state-writer.
func TestGoroutinesCarryProfileLabels(t *testing.T) {
	f := newFakeRuntime(t, false)
	var (
		mu              sync.Mutex
		handler, pinner []map[string]string
		errs            []error
	)
	keep := func(into *[]map[string]string, fn string) {
		got, err := proflabeltest.LabelsOf(fn)
		mu.Lock()
		defer mu.Unlock()
		*into = append(*into, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) {
		rp.p.beforeReply = func(event, _ string) {
			if event == "CreateContainer" {
				keep(&handler, "(*Plugin).decidedHook")
			}
		}
		rp.p.pins.hold = func() { keep(&pinner, "(*Plugin).pinLoop") }
	})
	pod := f.runPod(podSpec{name: "web", qos: "burstable"})
	f.sandboxCPUs(pod) // the pinner's round is done
	_, _, err := f.createContainer(pod, "app", 1000)
	require.NoError(t, err)
	writer, err := proflabeltest.WaitLabelsOf("(*stateWriter).run")
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, errs)
	assert.Equal(t, []map[string]string{{proflabel.KeyNRI: "CreateContainer"}}, handler, "the handler's goroutine while it decides")
	require.NotEmpty(t, pinner, "the pinner ran a round")
	for _, got := range pinner {
		assert.Equal(t, map[string]string{proflabel.KeyWorker: proflabel.SandboxPinner}, got, "the sandbox pinner's goroutine")
	}
	assert.Equal(t, []map[string]string{{proflabel.KeyWorker: proflabel.StateWriter}}, writer, "the state writer's goroutine")
}

// TestRuntimeStatusWriterCarriesItsProfileLabel: the background write of
// the connection's state to the status file (noteRuntime) is a worker like
// the state writer: it carries worker=status-writer, not the labels of
// whatever goroutine noted the change (none, for Run), so that a profile
// taken while a status write hangs on a slow disk says where it is.
func TestRuntimeStatusWriterCarriesItsProfileLabel(t *testing.T) {
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "4-7,12-15"`)
	p.statusMu.Lock() // the write waits here, where its labels are read
	p.noteRuntime(RuntimeWaiting, "nri.sock", "lost the connection to the runtime; reconnecting")
	writer, err := proflabeltest.WaitLabelsOf("(*Plugin).writeRuntimeStatus")
	p.statusMu.Unlock()
	p.exit.late.Wait()
	require.NoError(t, err)
	assert.Equal(t, []map[string]string{{proflabel.KeyWorker: proflabel.StatusWriter}}, writer, "the status writer's goroutine")
}
