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

// avoids tells whether a mask names none of the held CPUs. A mask the
// kernel shows narrower than written (rps_cpus drops isolcpus= CPUs) or
// that someone narrowed further still meets the want: like an IRQ's
// affinity, any mask free of held CPUs does, and is not written back.
func avoids(content string, held cpuset.CPUSet) bool {
	set, err := irq.ParseMask(content)
	return err == nil && set.Intersection(held).IsEmpty()
}

// maskChange is the change of one mask file.
func maskChange(path, what string, held, runnable cpuset.CPUSet) hostfiles.Change {
	return hostfiles.Change{Path: path,
		Want:      func(original string) (string, error) { return narrowed(what, original, held, runnable) },
		Satisfied: func(content, _ string) bool { return avoids(content, held) },
	}
}
