package allocator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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

// powerClass decides an exclusive container's power class: its pool's
// class, or the one its annotation chooses among those the pool allows.
// Shared and infra containers have none of their own: their CPUs have
// their pool's class. Under power.unsupported: refuse, a class this node
// cannot apply in full is refused.
func (p *Policy) powerClass(c Container, pool string) (string, error) {
	key, v, annotated := lookup(c.Annotations, AnnotationPowerClass, c.Name)
	pp := p.cfg.PowerPool(pool)
	if !annotated {
		if !pools.IsExclusive(pool) {
			return "", nil
		}
		if why, refused := p.powerRefusals[pp.Class]; refused {
			return "", &Refusal{Reason: ReasonPower, Err: fmt.Errorf("the power class %s of pool %s (power.pools.%s.class) cannot be applied on this node: %s (power.unsupported: refuse)", pp.Class, pool, pool, why)}
		}
		return pp.Class, nil
	}
	class := strings.TrimSpace(v)
	if !pools.IsExclusive(pool) {
		why := "a power class is chosen for a container's exclusive CPUs, and the container goes to " + pool
		if pp.Class != "" {
			why += fmt.Sprintf(", whose CPUs have the pool's class %s", pp.Class)
		}
		return "", &AnnotationError{key, v, why}
	}
	if !p.cfg.PowerAllows(pool, class) {
		allowed := slices.Clone(pp.Allowed)
		if pp.Class != "" {
			allowed = append([]string{pp.Class}, allowed...)
		}
		if len(allowed) == 0 {
			return "", &AnnotationError{key, v, fmt.Sprintf("pool %s offers no power classes (power.pools.%s); the node's operator can add some", pool, pool)}
		}
		return "", &AnnotationError{key, v, fmt.Sprintf("pool %s offers the power classes %s (power.pools.%s)", pool, strings.Join(allowed, ", "), pool)}
	}
	if why, refused := p.powerRefusals[class]; refused {
		return "", &Refusal{Reason: ReasonPower, Err: &AnnotationError{key, v, fmt.Sprintf("this node cannot apply the class: %s (power.unsupported: refuse)", why)}}
	}
	return class, nil
}

// SetPowerRefusals gives the classes that containers may not have on this
// node, with the reason (power.Node.Refusals): the policy itself reads no
// node.
func (p *Policy) SetPowerRefusals(refusals map[string]string) {
	p.powerRefusals = maps.Clone(refusals)
}
