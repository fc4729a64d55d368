package housekeeping

// The kernel's thread affinity (sched_getaffinity, sched_setaffinity), for
// the affinity confinement of kernel threads and, on cgroup v1, of the
// host's user-space threads (threads.go).

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// MaxAffinityCPUs bounds the CPU ids whose affinity can be read and
// written: the mask given to the kernel has this many bits (4096, the
// kernel's largest NR_CPUS on x86 and arm64). unix.CPUSet has 1024 bits
// only, too few for the largest nodes, hence the raw system calls.
const MaxAffinityCPUs = 4096

// affinityWords is the mask's length in 64-bit words.
const affinityWords = MaxAffinityCPUs / 64

// Affinity reads and sets a thread's CPU affinity. KernelAffinity is the
// kernel's; tests use a fake.
type Affinity interface {
	Get(tid int) (cpuset.CPUSet, error)
	Set(tid int, cpus cpuset.CPUSet) error
}

// KernelAffinity is the kernel's sched_getaffinity and sched_setaffinity.
// Errors are the kernel's errnos (ESRCH: no such thread; EINVAL: no CPU
// of the mask is allowed to the thread, by its cpuset or because it is a
// kernel thread that must stay where it is; EPERM: no privilege, or
// PF_NO_SETAFFINITY).
type KernelAffinity struct{}

var _ Affinity = KernelAffinity{}

// Get reads a thread's affinity.
func (KernelAffinity) Get(tid int) (cpuset.CPUSet, error) {
	var mask [affinityWords]uint64
	_, _, errno := unix.RawSyscall(unix.SYS_SCHED_GETAFFINITY, uintptr(tid), uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return cpuset.New(), errno
	}
	var cpus []int
	for w, bits := range mask {
		for b := range 64 {
			if bits&(1<<b) != 0 {
				cpus = append(cpus, 64*w+b)
			}
		}
	}
	return cpuset.New(cpus...), nil
}

// Set sets a thread's affinity. A CPU id at or above MaxAffinityCPUs is
// refused (EINVAL) rather than dropped from the mask.
func (KernelAffinity) Set(tid int, cpus cpuset.CPUSet) error {
	var mask [affinityWords]uint64
	for _, c := range cpus.UnsortedList() {
		if c < 0 || c >= MaxAffinityCPUs {
			return fmt.Errorf("CPU %d: affinity masks here cover CPUs 0-%d: %w", c, MaxAffinityCPUs-1, syscall.EINVAL)
		}
		mask[c/64] |= 1 << (c % 64)
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETAFFINITY, uintptr(tid), uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return errno
	}
	return nil
}
