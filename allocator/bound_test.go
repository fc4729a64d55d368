package allocator

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// exhaustivePlan is bestPlan without the bound: every combination of the
// fewest nodes that fit is built, and the best kept.
func exhaustivePlan(p *planner, nodes []nodeCap, need int, req Request) (*plan, bool) {
	for k := 1; k <= len(nodes); k++ {
		var best *plan
		forEachCombination(len(nodes), k, func(idx []int) {
			var combo []nodeCap
			for _, j := range idx {
				combo = append(combo, nodes[j])
			}
			c, ok := p.candidate(combo, need, req)
			if !ok {
				return
			}
			if cand := p.build(&c); best == nil || cand.better(best) {
				best = cand
			}
		})
		if best != nil {
			return best, true
		}
	}
	return nil, false
}

// TestBoundedSearchMatchesExhaustiveSearch: on fragmented pools of every
// shape, with every mode and option, the branch and bound returns exactly
// the plan that building every combination returns.
func TestBoundedSearchMatchesExhaustiveSearch(t *testing.T) {
	fixtures := map[string]string{
		"desktop-8c16t":           "isolatedCPUs: \"2-7,10-15\"",
		"xeon-2s-snc2":            "isolatedCPUs: \"4-39,44-79\"",
		"epyc-1s-nps4":            "isolatedCPUs: \"8-63,72-127\"",
		"epyc-2s-384":             "isolatedCPUs: \"2-191,194-383\"",
		"xeon-1s-nosmt":           "isolatedCPUs: \"2-15\"",
		"server-offline-isolcpus": "pools: {exclusive: {count: 6}, shared: {count: 4}}",
		// NUMA nodes that span sockets, and four threads a core.
		"kubelet-multi-socket-dual-socket-per-numa-ht": "isolatedCPUs: \"1-39,41-79\"",
		"epyc-2s-nps0":                    "isolatedCPUs: \"1-63,65-127\"",
		"kubelet-quad-socket-four-way-ht": "isolatedCPUs: \"1-108,110-168,170-228,230-287\"",
		// The big and sparse shapes (issue 33).
		"xeon-2s-gnr-snc3":   "isolatedCPUs: \"1-239,241-479\"",
		"epyc-2s-turin-nps4": "isolatedCPUs: \"1-383,385-767\"",
		"epyc-2s-1024":       "isolatedCPUs: \"1-511,513-1023\"",
		"sparse-4096":        "isolatedCPUs: \"1-47,1024-1029,1031-1055,2032-2047,2049,2051-2095,3072-3077,3079-3103,4080-4094\"",
	}
	compared := 0
	for name, cfg := range fixtures {
		t.Run(name, func(t *testing.T) {
			a := newAllocator(t, name, cfg)
			rng := rand.New(rand.NewSource(int64(len(name))))
			tpc := a.x.threadsPerCore
			var live []string
			for step := 0; step < 300; step++ {
				// Fragment the pool: random sizes in, random ones out.
				if len(live) > 0 && rng.Intn(2) == 0 {
					i := rng.Intn(len(live))
					a.Release(live[i])
					live = append(live[:i], live[i+1:]...)
				}
				fill := exclusive(fmt.Sprintf("f%d", step), 1+rng.Intn(5))
				fill.Options.HideHyperthreads = rng.Intn(6) == 0
				if _, err := a.Allocate(fill); err == nil {
					live = append(live, fill.ID)
				}

				for probe := 0; probe < 3; probe++ {
					req := exclusive("probe", 1+rng.Intn(12))
					req.Options.DistributeAcrossNUMA = rng.Intn(3) == 0
					nodes := a.x.nodes
					if rng.Intn(3) == 0 {
						req.PreferNUMA = cpuset.New(nodes[rng.Intn(len(nodes))])
					}
					if rng.Intn(5) == 0 {
						req.NUMANodes = cpuset.New(nodes[rng.Intn(len(nodes))], nodes[rng.Intn(len(nodes))])
					}
					n, need, m := CPUsFor(req.MilliCPU), CPUsFor(req.MilliCPU), modeThreads
					switch rng.Intn(4) {
					case 0:
						if tpc > 1 {
							m = modeHideSiblings
						}
					case 1:
						if tpc > 1 && n%tpc == 0 {
							m, need = modeFullCores, n/tpc
						}
					}
					p := a.newPlanner(req, m)
					cands, total := p.candidateNodes(a.views[pools.Exclusive], req)
					if total < need {
						continue
					}
					got, gotOK := p.bestPlan(cands, need, req)
					want, wantOK := exhaustivePlan(p, cands, need, req)
					require.Equal(t, wantOK, gotOK, "step %d: %+v", step, req)
					if !wantOK {
						continue
					}
					want.cpus, want.reserved = cpuset.New(want.picked...), cpuset.New(want.reservedIDs...)
					require.Equal(t, want.cpus.String(), got.cpus.String(), "step %d, mode %d, %d CPUs, options %+v: CPUs", step, m, n, req.Options)
					require.Equal(t, want.reserved.String(), got.reserved.String(), "step %d: reserved", step)
					require.Equal(t, want.nodes, got.nodes, "step %d: nodes", step)
					compared++
				}
			}
		})
	}
	require.Greater(t, compared, 1000, "enough placements compared")
}
