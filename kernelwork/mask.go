package kernelwork

import (
	"fmt"

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
