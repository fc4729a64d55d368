package allocator

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestUsageCountsWhatTheSetsHold: Usage counts without building sets; its
// figures must equal the sets' sizes after any sequence of decisions
// (walkDecisions), and exclusive-non-isolcpus lends only free CPUs that
// are still in infra.
func TestUsageCountsWhatTheSetsHold(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "4-7,12-15"`+"\nreservedCPUs: \"0,8\"\npools: {shared: {cpus: \"7,15\"}, exclusive-non-isolcpus: {enabled: true}}")
	walkDecisions(a, rand.New(rand.NewSource(7)), 200, func(r *Request, _ *rand.Rand) {}, func(step int) {
		members := map[string]int{}
		for _, as := range a.Assignments() {
			members[as.Pool]++
		}
		held := map[string]cpuset.CPUSet{}
		for _, h := range a.Holds() {
			held[h.Pool] = h.Held().Union(held[h.Pool])
		}
		usage := a.Usage()
		require.Len(t, usage, len(pools.Names()))
		for i, u := range usage {
			require.Equal(t, pools.Names()[i], u.Pool)
			assert.Equal(t, a.PoolCPUs(u.Pool).Size(), u.CPUs, "step %d: %s size", step, u.Pool)
			assert.Equal(t, members[u.Pool], u.Containers, "step %d: %s members", step, u.Pool)
			if !u.Exclusive() {
				assert.Zero(t, u.Free)
				assert.Zero(t, u.Held)
				continue
			}
			assert.Equal(t, held[u.Pool].Size(), u.Held, "step %d: %s held", step, u.Pool)
			want := a.FreeCPUs(u.Pool)
			if u.Pool == pools.ExclusiveNonIsolcpus {
				want = want.Intersection(a.PoolCPUs(pools.Infra))
			}
			assert.Equal(t, want.String(), a.AvailableCPUs(u.Pool).String(), "step %d: %s available", step, u.Pool)
			assert.Equal(t, want.Size(), u.Free, "step %d: %s free", step, u.Pool)
		}
	})
}

// walkDecisions makes steps random decisions on a and calls check after
// each: creations of 1 to 3 CPUs in every pool (dress sets what else a
// request asks), releases, stops whose CPUs stay held (the container
// failed or completed), resizes, and pods' ends that release the holds.
func walkDecisions(a *Allocator, rng *rand.Rand, steps int, dress func(*Request, *rand.Rand), check func(step int)) {
	choices := []string{pools.Exclusive, pools.ExclusiveNonIsolcpus, pools.Shared, pools.Infra}
	var live []string
	for step := 0; step < steps; step++ {
		switch {
		case len(live) > 0 && rng.Intn(3) == 0:
			k := rng.Intn(len(live))
			if rng.Intn(2) == 0 {
				a.Release(live[k])
			} else {
				code := int32(rng.Intn(2))
				a.Stop(live[k], &code) // an exclusive container's CPUs stay held
			}
			live = append(live[:k], live[k+1:]...)
		case len(live) > 0 && rng.Intn(6) == 0:
			_, _ = a.Resize(Request{ID: live[rng.Intn(len(live))], MilliCPU: int64(1+rng.Intn(3)) * 1000, NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()})
		case rng.Intn(10) == 0:
			if hs := a.Holds(); len(hs) > 0 {
				a.ReleasePod(hs[rng.Intn(len(hs))].Pod.UID)
			}
		default:
			r := exclusive(fmt.Sprintf("c%d", step), 1+rng.Intn(3))
			r.Pool = choices[rng.Intn(len(choices))]
			dress(&r, rng)
			if _, err := a.Allocate(r); err == nil {
				live = append(live, r.ID)
			}
		}
		check(step)
	}
}
