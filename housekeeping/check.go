package housekeeping

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
)

// Check warns when the housekeeping set can become small for the node:
// with every CPU the pools may keep kept (the exclusive pool, the shared
// pool kept always, every CPU exclusive-non-isolcpus may lend), the CPUs
// left to host processes, less the isolated ones they do not run on
// anyway, are fewer than 2, or than 1 in 16 of the online CPUs. The
// kubelet, the runtime, journald and sshd then share them.
func Check(cfg *config.Config, layout *allocator.Layout) config.Problems {
	var p config.Problems
	if !cfg.HousekeepingEnabled() {
		return p
	}
	kept := cpuset.New()
	key := ""
	for _, pool := range []string{pools.Exclusive, pools.Shared, pools.ExclusiveNonIsolcpus} {
		if cfg.Housekeeping(pool) == config.HousekeepingOff {
			continue
		}
		if key == "" {
			key = "pools." + pool + ".housekeeping"
		}
		switch pool {
		case pools.ExclusiveNonIsolcpus:
			// Infra lends down to MinInfraCPUs, never its reserved or
			// isolated CPUs. Which CPUs it lends does not change how
			// many are left.
			kept = kept.Union(cpuset.New(layout.ExclusiveNonIsolcpus.List()[:layout.MaxLent()]...))
		default:
			kept = kept.Union(layout.Pool(pool))
		}
	}
	left := layout.Online.Difference(kept)
	usable := left.Difference(layout.Isolated)
	want := max(2, (layout.Online.Size()+15)/16)
	if usable.Size() < want {
		p.Warnf(key, "host processes may be left %d of this node's %d CPUs once every CPU the pools may keep is held, %d of them not isolated; fewer than %d (2, and 1 in 16 of the CPUs) may starve the kubelet, the runtime and sshd: raise pools.exclusive-non-isolcpus.minInfraCPUs or reservedCPUs, or keep fewer pools",
			left.Size(), layout.Online.Size(), usable.Size(), want)
	}
	return p
}
