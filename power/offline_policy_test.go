package power

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// inactivePolicy is cpufreq with one policy inactive: its CPUs went
// offline, and cpufreq's show() and store() answer EBUSY for every file
// of an inactive policy (drivers/cpufreq/cpufreq.c), until a CPU of it is
// online again.
type inactivePolicy struct {
	hostfiles.FS
	dir string
}

func (k *inactivePolicy) busy(path string) bool {
	return k.dir != "" && strings.HasPrefix(path, k.dir+string(filepath.Separator))
}

func (k *inactivePolicy) WriteFile(path string, data []byte) error {
	if k.busy(path) {
		return &os.PathError{Op: "write", Path: path, Err: syscall.EBUSY}
	}
	return k.FS.WriteFile(path, data)
}

func (k *inactivePolicy) ReadFile(path string) ([]byte, error) {
	if k.busy(path) {
		return nil, &os.PathError{Op: "read", Path: path, Err: syscall.EBUSY}
	}
	return k.FS.ReadFile(path)
}

// TestOfflinePolicyHoldsBackNoOtherCPUsRestores: CPU 4 has
// the saver class (a preference, Order 2), CPU 2 the latency class
// (governor, idle states, PM QoS: Order 0). CPU 4 goes offline, its
// policy inactive (EBUSY), and both containers end. The restore of CPU
// 4's preference fails for now, and hostfiles holds back every restore of
// the same owner with a lower Order (restore.go heldBack, per owner):
// CPU 2, which is online and has nothing to do with CPU 4's policy, keeps
// the performance governor, its deep idle states disabled and its PM QoS
// at n/a for as long as CPU 4 stays offline.
func TestOfflinePolicyHoldsBackNoOtherCPUsRestores(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	orig := n.snapshot(t)
	policy4, err := filepath.EvalSymlinks(n.cpu(4, "cpufreq"))
	require.NoError(t, err)
	fsys := &inactivePolicy{FS: n.kernel}
	p := n.start(t, loadClasses(t, ""), fsys)
	p.pass(t, map[int]string{2: "low-latency", 4: "saver"})
	require.Equal(t, "performance", n.read(t, n.cpu(2, "cpufreq/scaling_governor")))
	require.Equal(t, "power", n.read(t, n.cpu(4, "cpufreq/energy_performance_preference")))

	fsys.dir = policy4 // CPU 4 offline
	p.want.set(nil)
	for range 3 {
		_ = p.rec.Flush() // EBUSY for policy4 is transient: retried
	}
	left := changed(orig, n.snapshot(t))
	for file := range left {
		if strings.HasPrefix(file, "cpufreq/policy4/") {
			delete(left, file) // CPU 4's: waits for it to be online
		}
	}
	assert.Empty(t, left, "CPU 2's files (and the uncore) are back although CPU 4's policy is inactive")
}
