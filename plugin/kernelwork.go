package plugin

// Kernel work kept off held CPUs: the plugin's side of package
// kernelwork. A decision only changes the allocator and kicks the host
// files' reconciler; its background pass asks which CPUs the exclusive
// containers hold (kernelWorkHeld) and narrows the rps_cpus and
// workqueue masks.

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/kernelwork"
)

// kernelWorkSources are the Sources of kernelWork.*: each when its knob
// is on, or the journal holds masks an earlier run changed (restored once
// nothing wants them: a restart with the knob off). Nil otherwise.
// The global workqueue mask is housekeeping's when a pool has it
// (narrowed to its housekeeping set less this knob's held CPUs, those of
// pools without housekeeping too: WorkqueueAlsoOff; two owners of one
// file would fight over it); otherwise it is this source's, and housekeeping, which may
// run for keepHostOffIsolcpus alone, leaves it (LeaveWorkqueueMask: the
// kernel keeps isolcpus= CPUs out of it itself).
func (p *Plugin) kernelWorkSources(j *hostfiles.Journal) (*kernelwork.RPSSource, *kernelwork.WorkqueueSource) {
	cfg := kernelwork.Config{SysfsRoot: p.cfg.SysfsRoot, ProcRoot: p.cfg.ProcRoot, Online: p.topo.Online, DomainIsolated: p.topo.DomainIsolated}
	var rps *kernelwork.RPSSource
	if p.cfg.RPSHeld() || hasOwner(j, kernelwork.RPSOwner) {
		c := cfg
		c.Held = p.kernelWorkHeld((*config.Config).RPSHeld)
		rps = kernelwork.NewRPSSource(c, p.log)
	}
	var wq *kernelwork.WorkqueueSource
	if p.cfg.WorkqueuesHeld() || hasOwner(j, kernelwork.WorkqueueOwner) {
		c := cfg
		c.Held = p.kernelWorkHeld((*config.Config).WorkqueuesHeld)
		wq = kernelwork.NewWorkqueueSource(kernelwork.WorkqueueConfig{Config: c, Global: !p.cfg.HousekeepingEnabled()}, p.log)
	}
	return rps, wq
}

// kernelWorkHeld returns, for the reconciler's pass, the CPUs the
// containers and holds of the exclusive pools hold (their hidden siblings
// too) while the knob is on in the config in force; none when it is off,
// so that every mask is restored. It is asked under the plugin's lock at
// every pass, by each knob's Source and by housekeeping's workqueue mask:
// it walks the exclusive containers only (allocator.HeldCPUs), not a
// sorted copy of every container.
func (p *Plugin) kernelWorkHeld(on func(*config.Config) bool) func() cpuset.CPUSet {
	return func() cpuset.CPUSet {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !on(p.cfg) {
			return cpuset.New()
		}
		return p.alloc.HeldCPUs(func(string) bool { return true })
	}
}
