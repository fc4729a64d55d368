package allocator

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestCoreTallyFollowsEveryTake: after any sequence of placements (every
// mode, both exclusive pools, a pod's held CPUs reused), stops, releases
// and pods released, each exclusive pool's core counts are what a walk over
// every core finds, and so is each node's room in every mode.
func TestCoreTallyFollowsEveryTake(t *testing.T) {
	for _, tc := range []struct{ fixture, config string }{
		{"desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive-non-isolcpus: {enabled: true}}"},
		{largeNode, `isolatedCPUs: "1-191,193-383"`},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			a := newAllocator(t, tc.fixture, tc.config)
			rng := rand.New(rand.NewSource(7))
			var running []Request
			checkTally(t, a, "at start")
			for step := range 400 {
				switch op := rng.Intn(10); {
				case op < 5 || len(running) == 0:
					r := exclusive(fmt.Sprintf("c%d", step), 1+rng.Intn(6))
					if len(running) > 0 && rng.Intn(3) == 0 {
						// Another container of a running one's pod: it may
						// reuse what the pod holds.
						r = inPod(running[rng.Intn(len(running))], r.ID, r.ID, 1+rng.Intn(4))
					}
					if a.Layout().ExclusiveNonIsolcpus.Size() > 0 && rng.Intn(3) == 0 {
						r.Pool = pools.ExclusiveNonIsolcpus
					}
					r.Options.FullPCPUsOnly = rng.Intn(4) == 0
					r.Options.HideHyperthreads = rng.Intn(4) == 0
					if _, err := a.Allocate(r); err == nil {
						running = append(running, r)
					}
				case op < 7:
					i := rng.Intn(len(running))
					a.Stop(running[i].ID, nil)
					running = append(running[:i], running[i+1:]...)
				case op < 9:
					i := rng.Intn(len(running))
					a.Release(running[i].ID)
					running = append(running[:i], running[i+1:]...)
				default:
					uid := running[rng.Intn(len(running))].Pod.UID
					a.ReleasePod(uid)
					kept := running[:0]
					for _, r := range running {
						if r.Pod.UID != uid {
							kept = append(kept, r)
						}
					}
					running = kept
				}
				checkTally(t, a, fmt.Sprintf("after step %d", step))
			}
		})
	}
}

// checkTally compares the exclusive pools' kept counts with a recount.
func checkTally(t *testing.T, a *Allocator, when string) {
	t.Helper()
	for _, pool := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
		v := a.views[pool]
		for i := range v.nodes {
			nv := &v.nodes[i]
			want := make([]int, len(nv.counts))
			for _, l3 := range nv.l3s {
				for _, c := range l3.cores {
					free := 0
					for _, id := range c.threads {
						if a.owner[id] == "" {
							free++
						}
					}
					want[v.tally.shapeOffset(c.complete, len(c.threads))+free]++
				}
			}
			require.Equal(t, want, nv.counts, "pool %s, node %d, %s: the kept core counts differ from a recount", pool, nv.id, when)
			for _, m := range []mode{modeThreads, modeFullCores, modeHideSiblings} {
				p := &planner{a: a, mode: m, tpc: a.x.threadsPerCore, s: &scratch{}}
				got := p.nodeCapacity(nv)
				cap, part, whole := walkedCapacity(p, nv)
				require.Equal(t, cap, got.cap, "pool %s, node %d, mode %d, %s: room", pool, nv.id, m, when)
				require.Equal(t, part, got.t.part, "pool %s, node %d, mode %d, %s: partly free cores", pool, nv.id, m, when)
				require.Equal(t, whole, got.t.whole, "pool %s, node %d, mode %d, %s: whole cores", pool, nv.id, m, when)
			}
		}
	}
}

// walkedCapacity is a node's room in p's mode by a walk over its cores, as
// nodeCapacity found it before the counts were kept.
func walkedCapacity(p *planner, nv *nodeView) (int, []int, []int) {
	part, whole := make([]int, p.tpc+1), make([]int, p.tpc+1)
	total := 0
	for _, l3 := range nv.l3s {
		for _, c := range l3.cores {
			units := p.unitsOf(p.state(&c))
			free := 0
			for _, id := range c.threads {
				if p.a.owner[id] == "" {
					free++
				}
			}
			w := free == len(c.threads) && c.complete
			total += units
			if w || p.mode != modeThreads {
				whole[units]++
			} else {
				part[units]++
			}
		}
	}
	part[0], whole[0] = 0, 0
	return total, part, whole
}
