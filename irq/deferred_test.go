package irq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// quietNode is an 8-CPU node whose IRQ 30 (a quiet queue, every CPU) is
// routed to effective, IRQ 31 (every CPU) to CPU 0, and IRQ 32 (CPUs 0-1,
// never moved by the plugin) claims to be routed to CPU 2: what someone
// else's move left, not the plugin's to follow.
func quietNode(t *testing.T, effective string, noFile bool) *node {
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	spec := procfixture.Spec{CPUs: all, BootID: boot, IRQs: []procfixture.IRQ{
		{N: 30, Affinity: all, Node: -1, Description: "PCI-MSI 49154-edge virtio5-requests", Effective: effective},
		{N: 31, Affinity: all, Node: -1, Description: "PCI-MSI 49155-edge virtio5-input.0"},
		{N: 32, Affinity: cpuset.New(0, 1), Node: -1, Description: "PCI-MSI 49156-edge virtio6-config", Effective: "2"},
	}}
	if noFile {
		for i := range spec.IRQs {
			spec.IRQs[i].NoEffective = true
		}
	}
	n := newNode(t, spec, "")
	n.action(30, "virtio5-requests")
	return n
}

func (n *node) setEffective(irq, list string) {
	n.t.Helper()
	require.NoError(n.t, os.WriteFile(filepath.Join(n.proc, "irq", irq, "effective_affinity_list"), []byte(list+"\n"), 0o644))
}

// logged are the messages logged at level and above that contain s.
func (n *node) logged(level logrus.Level, s string) []string {
	var out []string
	for _, e := range n.hook.AllEntries() {
		if e.Level <= level && strings.Contains(e.Message, s) {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestDeferredMoves: the kernel may defer an IRQ's move off a banned CPU
// until the IRQ next fires (effective_affinity_list still names the CPU
// while smp_affinity_list no longer does). The Source counts such IRQs
// (MovesPending, cpupool_irq_moves_pending), logs each once with both
// masks, and sees the move complete at a later pass. It reads the
// effective affinity only of the IRQs it moved: IRQ 32, which it never
// moved, is not counted. A kernel without the file, or a file that is no
// CPU list, is no pending move and no failed pass.
func TestDeferredMoves(t *testing.T) {
	for _, tc := range []struct {
		name        string
		effective   string
		noFile      bool
		wantPending int
		wantLog     string
		wantLevel   logrus.Level
	}{
		{name: "pending: effective still names banned CPU 2", effective: "2", wantPending: 1, wantLevel: logrus.InfoLevel,
			wantLog: "IRQ 30 (virtio5-requests): moved off the banned CPUs, but the kernel deferred the move until the IRQ next fires (its previous move was incomplete): smp_affinity_list 0-1,3-7, effective_affinity_list 2; its next interrupt is taken on CPU 2"},
		{name: "completed: effective within the new affinity", effective: "5", wantPending: 0},
		{name: "missing effective_affinity_list", noFile: true, wantPending: 0, wantLevel: logrus.InfoLevel,
			wantLog: "the kernel shows no effective affinity of IRQs"},
		{name: "garbage in effective_affinity_list", effective: "2-x", wantPending: 0, wantLevel: logrus.WarnLevel,
			wantLog: "irq/30/effective_affinity_list: malformed CPU list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := quietNode(t, tc.effective, tc.noFile)
			n.ban(2)
			assert.Equal(t, "0-1,3-7", n.affinity("30"), "moved off CPU 2")
			assert.Empty(t, n.r.Status().LastError, "the pass completed")
			assert.Equal(t, tc.wantPending, n.src.MovesPending())
			if tc.wantLog != "" {
				assert.Len(t, n.logged(tc.wantLevel, tc.wantLog), 1, "logged once: %v", n.hook.AllEntries())
			}
			require.NoError(t, n.r.Flush()) // a rescan
			assert.Equal(t, tc.wantPending, n.src.MovesPending())
			if tc.wantPending > 0 {
				assert.Len(t, n.logged(logrus.InfoLevel, "IRQ 30"), 1, "not logged again while it stays pending")
			}
			if tc.noFile {
				assert.Len(t, n.logged(logrus.InfoLevel, tc.wantLog), 1, "said once per process")
			}
		})
	}
}

// TestDeferredMoveCompletes: the IRQ fires, the kernel applies the move
// (effective_affinity_list within the new affinity): the next pass, a
// rescan or a kicked one, counts it no more and says so.
func TestDeferredMoveCompletes(t *testing.T) {
	for _, kicked := range []bool{false, true} {
		n := quietNode(t, "2", false)
		n.ban(2)
		require.Equal(t, 1, n.src.MovesPending())
		n.setEffective("30", "3") // its next interrupt, on CPU 2, completed the move
		if kicked {
			require.NoError(t, n.r.FlushKicked())
		} else {
			require.NoError(t, n.r.Flush())
		}
		assert.Equal(t, 0, n.src.MovesPending(), "kicked %v", kicked)
		assert.Len(t, n.logged(logrus.InfoLevel, "IRQ 30 (virtio5-requests): its deferred move completed: it is routed to CPUs 3 now, not 2"), 1)
	}
}

// TestDeferredMoveReleased: once no CPU is banned, a pending move no
// longer matters (the IRQ gets its original affinity back): not counted.
func TestDeferredMoveReleased(t *testing.T) {
	n := quietNode(t, "2", false)
	n.ban(2)
	require.Equal(t, 1, n.src.MovesPending())
	n.ban()
	assert.Equal(t, "0-7", n.affinity("30"), "restored")
	assert.Equal(t, 0, n.src.MovesPending())
}

// TestDeferredMoveUnneeded: the CPU a pending move was to leave is given
// back while another CPU stays banned. The move no longer matters (not
// counted), and the kernel completed nothing (the IRQ is still routed
// there): the log says the move is no longer needed, not that it completed.
func TestDeferredMoveUnneeded(t *testing.T) {
	n := quietNode(t, "2", false)
	n.ban(2, 6)
	require.Equal(t, 1, n.src.MovesPending())
	n.ban(6) // CPU 2's container ended; CPU 6's still runs
	assert.Equal(t, 0, n.src.MovesPending())
	assert.Empty(t, n.logged(logrus.InfoLevel, "its deferred move completed"), "effective_affinity_list still reads 2")
	assert.Len(t, n.logged(logrus.InfoLevel, "IRQ 30 (virtio5-requests): its deferred move is no longer needed: CPUs 2, where it is still routed, are no longer kept free of IRQs"), 1)
}

// TestDeferredMoveFoundAfterRestart: a new process finds the IRQs the
// earlier one moved already meeting their want, and writes none of them;
// its first pass still reads their effective affinity, once, and counts
// a move still deferred.
func TestDeferredMoveFoundAfterRestart(t *testing.T) {
	n := quietNode(t, "5", false)
	n.ban(2)
	require.Equal(t, 0, n.src.MovesPending())
	n.r.Close()
	n.setEffective("30", "2") // say a move the earlier process made is deferred
	n.start("")
	n.ban(2)
	assert.Equal(t, 1, n.src.MovesPending(), "the first pass checks what the earlier process moved")
	assert.Equal(t, "0-1,3-7", n.affinity("30"))
}

// TestSingleCPU: the pass's cheap read of an effective affinity takes one
// CPU and leaves anything else to the full parse.
func TestSingleCPU(t *testing.T) {
	for in, want := range map[string]int{"5\n": 5, "0": 0, "383\n": 383, "65535\n": 65535} {
		cpu, ok := singleCPU([]byte(in))
		assert.True(t, ok, "%q", in)
		assert.Equal(t, want, cpu, "%q", in)
	}
	for _, in := range []string{"", "\n", "0-3\n", "2,5\n", "x\n", "-1", "123456\n"} {
		_, ok := singleCPU([]byte(in))
		assert.False(t, ok, "%q", in)
	}
}
