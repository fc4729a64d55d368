package housekeeping

import (
	"path/filepath"

	"github.com/cpupool/nri-cpupool/internal/procfs"
)

// SeesHostThreads tells whether procRoot shows the host's PID namespace:
// its PID 2 is a kernel thread (kthreadd). Kernel threads live only in the
// initial PID namespace, so a container without the host's PID namespace
// (a DaemonSet pod without hostPID) sees none. There the host's processes
// are invisible: their affinities, which a cgroup's cpuset change resets,
// could be neither recorded nor given back, so nothing that would reset
// them may run unasked.
func SeesHostThreads(procRoot string) bool {
	st, err := procfs.ReadStat(filepath.Join(procRoot, "2", "stat"))
	return err == nil && st.Kernel()
}
