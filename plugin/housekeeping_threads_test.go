package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/procfs"
)

// threadKernel is the kernel's thread affinities for a fake /proc.
type threadKernel struct {
	mu  sync.Mutex
	aff map[int]cpuset.CPUSet
}

func (k *threadKernel) Get(tid int) (cpuset.CPUSet, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.aff[tid]
	if !ok {
		return cpuset.New(), syscall.ESRCH
	}
	return a, nil
}

func (k *threadKernel) Set(tid int, cpus cpuset.CPUSet) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.aff[tid]; !ok {
		return syscall.ESRCH
	}
	k.aff[tid] = cpus
	return nil
}

func (k *threadKernel) get(tid int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.aff[tid].String()
}

// addKernelThread writes an unbound kernel thread's stat into the fake
// /proc and its affinity into k.
func (k *threadKernel) addKernelThread(t *testing.T, f *fakeRuntime, pid int, comm string, start uint64, affinity cpuset.CPUSet) {
	t.Helper()
	line := fmt.Sprintf("%d (%s) S 0 0 0 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, comm, procfs.PFKthread, start)
	path := filepath.Join(f.procRoot(), fmt.Sprint(pid), "stat")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(line), 0o644))
	k.mu.Lock()
	defer k.mu.Unlock()
	k.aff[pid] = affinity
}

// TestHousekeepingInheritedAfterKill (issue 41, item 8): the plugin is
// killed while a CPU is held, and a kernel thread forked meanwhile
// inherits kthreadd's narrow affinity. The next plugin knows from the
// journal that host threads were left confined, so it takes the new
// thread as having inherited the confinement and widens it on release;
// kthreadd gets exactly its original back.
func TestHousekeepingInheritedAfterKill(t *testing.T) {
	f := housekeptNode(t)
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	k := &threadKernel{aff: map[int]cpuset.CPUSet{}}
	k.addKernelThread(t, f, 2, "kthreadd", 1, all)
	withThreads := func(p *Plugin) { p.isolationFS = housekeeping.NewAffinityFS(hostfiles.OS{}, f.procRoot(), k) }

	first := startPlugin(t, f, housekeptDesktop, statePath(f), withThreads)
	pod := f.runPod(podSpec{name: "eni", namespace: "default", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	ctr, _, err := f.createContainer(pod, "app", 1000)
	require.NoError(t, err)
	require.NoError(t, first.p.FlushIsolation())
	held := cpusOf(t, f, f.cpus(ctr))
	host := all.Difference(held)
	require.Equal(t, host.String(), k.get(2), "kthreadd confined")
	first.kill()

	k.addKernelThread(t, f, 3000, "kworker/u32:7-new", 3000, host)
	second := startPlugin(t, f, housekeptDesktop, statePath(f), withThreads)
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, host.String(), k.get(3000))

	f.removeContainer(ctr)
	f.removePod(pod)
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, all.String(), k.get(2), "kthreadd: its original")
	assert.Equal(t, all.String(), k.get(3000), "forked while confined: widened")
	assert.Equal(t, housekeptFiles, housekeptNow(t, f))
}
