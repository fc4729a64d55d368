package kernelwork

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/irq"
)

// narrowed is the mask original without the held CPUs, in the kernel's
// layout (irq.FormatMask: never wider than the kernel accepts). An empty
// original (RPS off) stays empty. One left with no runnable CPU (online,
// not isolcpus=: Config.runnable) once the held ones are out gets the
// CPUs the host keeps (runnable less held): what is left would be an
// empty mask, which the kernel refuses (workqueues) or reads as "RPS
// off" (rps_cpus), or offline or isolated CPUs only, on which the kernel
// turns RPS off or refuses it (EINVAL) and runs a workqueue's workers
// wherever the scheduler falls back to, held CPUs included; none is what
// the mask's owner set. If the host keeps no CPU either, the mask is left
// as it is (an error, reported as a refusal).
func narrowed(what, original string, held, runnable cpuset.CPUSet) (string, error) {
	if strings.HasSuffix(strings.TrimSpace(original), ",") {
		// Linux 6.2's sysctl prints net.core.rps_default_mask into a
		// 128-byte buffer (dump_cpumask, enlarged by a later fix): past
		// 448 possible CPUs the read holds the highest groups and a
		// trailing comma, so which lower CPUs it names is unknown.
		return "", fmt.Errorf("%s: the kernel showed it cut short (%d groups and a trailing comma: this kernel's sysctl shows at most 448 CPUs of it); its lower CPUs are unknown, so it is left as it is (a kernel with the fixed dump_cpumask reads it whole)", what, strings.Count(original, ","))
	}
	orig, err := irq.ParseMask(original)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if orig.IsEmpty() {
		return original, nil
	}
	want := orig.Difference(held)
	if want.Intersection(runnable).IsEmpty() {
		want = runnable.Difference(held)
	}
	if want.IsEmpty() {
		return "", fmt.Errorf("%s: every CPU of the mask %s is held, and the host keeps no CPU to give it: left as it is", what, orig)
	}
	out, err := irq.FormatMask(want, original)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// meets tells whether a mask's content meets want, the mask the plugin
// wants there now (narrowed): it names none of the held CPUs, and every
// CPU of want the work may run on (runnable). Avoiding the held CPUs is
// not enough: a mask narrowed for an earlier, larger held set avoids the
// CPUs held now too, and would keep a released CPU out of the work for as
// long as any other CPU is held. CPUs the work may not run on are not
// asked for: the kernel drops isolcpus= CPUs from rps_cpus itself; other
// CPUs it drops when it takes a write (nohz_full's) are its own form of
// the want, which the reconciler takes as meeting it (KernelForm).
//
// A mask with no runnable CPU and no held one (RPS off, or an owner's
// mask of offline CPUs only) is left as it is: no held CPU gets work
// from it, and the fallback of narrowed is for masks the held CPUs
// emptied, not for masks set so on purpose.
func meets(content, want string, held, runnable cpuset.CPUSet) bool {
	have, err := irq.ParseMask(content)
	if err != nil || !have.Intersection(held).IsEmpty() {
		return false
	}
	if have.Intersection(runnable).IsEmpty() {
		return true
	}
	wanted, err := irq.ParseMask(want)
	return err == nil && wanted.Intersection(runnable).IsSubsetOf(have)
}

// maskChange is the change of one mask file.
func maskChange(path, what string, held, runnable cpuset.CPUSet) hostfiles.Change {
	return hostfiles.Change{Path: path,
		Want:       func(original string) (string, error) { return narrowed(what, original, held, runnable) },
		Satisfied:  func(content, want string) bool { return meets(content, want, held, runnable) },
		KernelForm: true,
	}
}
