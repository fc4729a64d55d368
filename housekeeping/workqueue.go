package housekeeping

import (
	"fmt"
	"path/filepath"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/irq"
)

// WorkqueueMask is the unbound workqueue mask below the sysfs root: the
// CPUs the kernel runs unbound work items on (writeback, most kworker
// work not queued on a particular CPU).
const WorkqueueMask = "sys/devices/virtual/workqueue/cpumask"

// workqueueChange narrows the unbound workqueue mask to its original less
// what set leaves out. The mask is written in the kernel's own layout
// (irq.FormatMask), so never wider than the kernel accepts. An original
// with no CPU of the set (someone confined the work to CPUs now kept) is
// refused rather than emptied: the kernel would refuse an empty mask too.
func workqueueChange(sysfsRoot string, set cpuset.CPUSet) hostfiles.Change {
	return hostfiles.Change{Path: filepath.Join(sysfsRoot, WorkqueueMask),
		Want: func(original string) (string, error) {
			orig, err := irq.ParseMask(original)
			if err != nil {
				return "", fmt.Errorf("unbound workqueue mask: %w", err)
			}
			want := orig.Intersection(set)
			if want.IsEmpty() {
				return "", fmt.Errorf("the unbound workqueue mask (CPUs %s) has no CPU of the housekeeping set %s: left as it is", orig, set)
			}
			return irq.FormatMask(want, original)
		},
		Satisfied: func(content, want string) bool {
			have, err1 := irq.ParseMask(content)
			wanted, err2 := irq.ParseMask(want)
			return err1 == nil && err2 == nil && have.Equals(wanted)
		}}
}
