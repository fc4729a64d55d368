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
// the others have their pool's. It is called off the reply path but under
// the plugin's lock (the background passes and the state writer's collect),
// so it walks the CPUs and their owners, not every container: its cost is
// the node's, the same at 0 and 5,000 running.
func (a *Allocator) PowerClasses(pc PoolPowerClasses) map[int]string {
	out := make(map[int]string, len(a.owner))
	var holdOf map[string]*Assignment // a hold's id to its assignment, built once one is needed
	for cpu, id := range a.owner {
		if id == "" {
			continue
		}
		as := a.containers[id]
		if as == nil || !as.inHeld(cpu) {
			if holdOf == nil {
				holdOf = make(map[string]*Assignment, len(a.holds))
				for _, h := range a.holds {
					holdOf[h.ID] = &h.Assignment
				}
			}
			as = holdOf[id]
		}
		if as == nil || !pools.IsExclusive(as.Pool) || !as.inHeld(cpu) {
			continue // not an exclusive holder's: its pool's class below
		}
		out[cpu] = as.PowerClass
	}
	for _, cpu := range a.layout.Online.UnsortedList() {
		if _, owned := out[cpu]; owned || cpu >= len(a.owner) {
			continue
		}
		out[cpu] = a.poolClass(cpu, pc)
	}
	maps.DeleteFunc(out, func(_ int, class string) bool { return class == "" })
	return out
}

// poolClass is the class of a CPU nobody holds: its pool's.
func (a *Allocator) poolClass(cpu int, pc PoolPowerClasses) string {
	switch {
	case a.layout.Exclusive.Contains(cpu):
		return pc.Idle
	case a.layout.Shared.Contains(cpu):
		return pc.Shared
	}
	return pc.Infra
}

// SetPowerRefusals gives the classes that containers may not have on this
// node, with the reason (power.Node.Refusals): the policy itself reads no
// node.
func (p *Policy) SetPowerRefusals(refusals map[string]string) {
	p.powerRefusals = maps.Clone(refusals)
}
