package allocator

import (
	"maps"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
)

// PoolPowerClasses are the classes of the CPUs no container's class
// covers: the exclusive pool's CPUs nobody holds (Idle), the shared pool's
// and infra's (exclusive-non-isolcpus CPUs that are not lent are infra's).
// "" leaves CPUs as the node has them.
type PoolPowerClasses struct {
	Idle, Shared, Infra string
}

// PoolPowerClassesOf reads them from the config.
func PoolPowerClassesOf(cfg *config.Config) PoolPowerClasses {
	return PoolPowerClasses{Idle: cfg.Power.Pools.Exclusive.IdleClass, Shared: cfg.Power.Pools.Shared.Class, Infra: cfg.Power.Pools.Infra.Class}
}

// PowerClasses returns the power class of every online CPU that has one:
// an exclusive container's or hold's CPUs (its reserved siblings too) have
// its class, which it keeps while its CPUs are held for its stopped run;
// the others have their pool's. It walks every CPU and assignment, and is
// called off the reply path (the background passes and the state writer).
func (a *Allocator) PowerClasses(pc PoolPowerClasses) map[int]string {
	out := make(map[int]string, len(a.owner))
	owned := make([]bool, len(a.owner))
	set := func(as *Assignment) {
		if !pools.IsExclusive(as.Pool) {
			return
		}
		for _, cpu := range as.Held().UnsortedList() {
			if cpu < len(owned) && a.owner[cpu] == as.ID {
				owned[cpu] = true
				if as.PowerClass != "" {
					out[cpu] = as.PowerClass
				}
			}
		}
	}
	for _, h := range a.holds {
		set(&h.Assignment)
	}
	for _, c := range a.containers {
		set(c)
	}
	for _, cpu := range a.layout.Online.UnsortedList() {
		if cpu >= len(owned) || owned[cpu] {
			continue
		}
		class := pc.Infra
		switch {
		case a.layout.Exclusive.Contains(cpu):
			class = pc.Idle
		case a.layout.Shared.Contains(cpu):
			class = pc.Shared
		}
		if class != "" {
			out[cpu] = class
		}
	}
	return out
}

// SetPowerRefusals gives the classes that containers may not have on this
// node, with the reason (power.Node.Refusals): the policy itself reads no
// node.
func (p *Policy) SetPowerRefusals(refusals map[string]string) {
	p.powerRefusals = maps.Clone(refusals)
}
