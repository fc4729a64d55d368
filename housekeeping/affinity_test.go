package housekeeping

import (
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfs"
)

// TestKernelAffinity reads, narrows and restores this test's own thread
// with the real system calls, through AffinityFS over the host's /proc;
// a CPU beyond the mask is refused, not dropped; a thread that does not
// exist is gone.
func TestKernelAffinity(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	k := KernelAffinity{}
	orig, err := k.Get(tid)
	require.NoError(t, err)
	require.False(t, orig.IsEmpty())

	st, err := procfs.ReadStat("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	require.NoError(t, err)
	fsys := NewAffinityFS(hostfiles.OS{}, "/proc", k)
	p := AffinityPath(tid, st.Start)
	data, err := fsys.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, orig.String(), string(data))

	first := cpuset.New(orig.List()[0])
	require.NoError(t, fsys.WriteFile(p, []byte(first.String())))
	now, err := k.Get(tid)
	require.NoError(t, err)
	assert.Equal(t, first.String(), now.String())
	require.NoError(t, fsys.WriteFile(p, []byte(orig.String())))
	now, err = k.Get(tid)
	require.NoError(t, err)
	assert.Equal(t, orig.String(), now.String())

	assert.ErrorIs(t, k.Set(tid, cpuset.New(MaxAffinityCPUs)), syscall.EINVAL)
	_, err = fsys.ReadFile(AffinityPath(tid, st.Start+1))
	assert.Equal(t, hostfiles.Gone, hostfiles.Classify(err), "another start time: another thread")
	_, err = k.Get(1 << 30)
	assert.ErrorIs(t, affinityErrno(err), syscall.ENOENT)
}
