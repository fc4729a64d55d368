package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/irq"
	"github.com/cpupool/nri-cpupool/kernelwork"
)

// MaskUse is the kernel masks of one kind (rps_cpus, workqueue cpumask)
// that name a held CPU: kernel work they steer may run there.
type MaskUse struct {
	// Count is how many masks name the CPU; Masks lists the first of
	// them ("eth0 rx-0"; "cpumask" is the global workqueue mask,
	// "writeback" a workqueue's own).
	Count int      `json:"count"`
	Masks []string `json:"masks,omitempty"`
	// Kept: the plugin is configured to keep this work off held CPUs
	// (kernelWork.*: held), so a mask naming the CPU is a problem, not
	// information.
	Kept bool `json:"kept"`
}

// kernelMask is one mask file read for the audit.
type kernelMask struct {
	name string
	cpus cpuset.CPUSet
}

// readKernelMasks reads every rps_cpus and unbound workqueue mask below
// sysfsRoot, and net.core.rps_default_mask below procRoot ("default
// (rps_default_mask)": what new devices start with), once per audit; a
// file that cannot be read or parsed (gone since listed, or a kernel
// before 6.2) is skipped.
func readKernelMasks(sysfsRoot, procRoot string) (rps, wq []kernelMask) {
	read := func(path, name string) (kernelMask, bool) {
		data, err := os.ReadFile(path)
		if err != nil {
			return kernelMask{}, false
		}
		set, err := irq.ParseMask(string(data))
		return kernelMask{name: name, cpus: set}, err == nil && !set.IsEmpty()
	}
	if m, ok := read(filepath.Join(procRoot, kernelwork.RPSDefaultMask), "default (rps_default_mask)"); ok {
		rps = append(rps, m)
	}
	files, _ := kernelwork.RPSFiles(sysfsRoot)
	for _, f := range files {
		queue := filepath.Dir(f)
		name := filepath.Base(filepath.Dir(filepath.Dir(queue))) + " " + filepath.Base(queue)
		if m, ok := read(f, name); ok {
			rps = append(rps, m)
		}
	}
	if m, ok := read(filepath.Join(sysfsRoot, kernelwork.GlobalWorkqueueMask), "cpumask"); ok {
		wq = append(wq, m)
	}
	files, _ = kernelwork.WorkqueueFiles(sysfsRoot)
	for _, f := range files {
		if m, ok := read(f, filepath.Base(filepath.Dir(f))); ok {
			wq = append(wq, m)
		}
	}
	return rps, wq
}

// maskUse is the masks that name CPU c, nil when none does.
func maskUse(masks []kernelMask, c int, kept bool, max int) *MaskUse {
	var u *MaskUse
	for _, m := range masks {
		if !m.cpus.Contains(c) {
			continue
		}
		if u == nil {
			u = &MaskUse{Kept: kept}
		}
		u.Count++
		if len(u.Masks) < max {
			u.Masks = append(u.Masks, m.name)
		}
	}
	return u
}

// judgeKernelWork adds the problems of kernel masks that name the CPU
// although the plugin keeps that work off held CPUs: a pass has not run
// yet, the kernel refused it (Options.Refused), or the global workqueue
// mask is housekeeping's and leaves the CPU of a pool without
// housekeeping in it.
func judgeKernelWork(cpu *CPU) {
	for _, k := range []struct {
		use       *MaskUse
		what, key string
	}{
		{cpu.RPS, "receive packet steering masks (rps_cpus)", "kernelWork.receivePacketSteering"},
		{cpu.Workqueues, "unbound workqueue masks", "kernelWork.workqueues"},
	} {
		if k.use == nil || !k.use.Kept {
			continue
		}
		cpu.Problems = append(cpu.Problems, fmt.Sprintf("%d %s name it although %s is held: %s", k.use.Count, k.what, k.key, strings.Join(k.use.Masks, ", ")))
	}
}
