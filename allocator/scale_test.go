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

// bigShapes are the shapes of issue 33 with all but CPU 0's core (and, on
// the sparse node, its offline CPUs) exclusive.
var bigShapes = map[string]string{
	"xeon-2s-gnr-snc3":   `isolatedCPUs: "1-239,241-479"`,
	"epyc-2s-turin-nps4": `isolatedCPUs: "1-383,385-767"` + "\npools: {exclusive-non-isolcpus: {enabled: true}}",
	"epyc-2s-1024":       `isolatedCPUs: "1-511,513-1023"`,
	"sparse-4096":        `isolatedCPUs: "1-47,1024-1029,1031-1055,2032-2047,2049,2051-2095,3072-3077,3079-3103,4080-4094"`,
}

// TestRecoveryOnTheBigShapes fills each big shape at random, with stopped
// containers' holds, then restarts: a new allocator readmits every
// container (half where the runtime runs them, half running on every CPU,
// which Repin pins back) and restores every hold. Each container gets its
// CPUs back, each hold its CPUs, and the invariants hold.
func TestRecoveryOnTheBigShapes(t *testing.T) {
	for name, cfg := range bigShapes {
		t.Run(name, func(t *testing.T) {
			a := newAllocator(t, name, cfg)
			rng := rand.New(rand.NewSource(int64(len(name))))
			choices := []string{pools.Exclusive, pools.Exclusive, pools.Exclusive, pools.Infra, pools.Shared, pools.ExclusiveNonIsolcpus}
			var live []string
			for i := 0; i < 150; i++ {
				r := exclusive(fmt.Sprintf("c%d", i), 1+rng.Intn(12))
				r.Pool = choices[rng.Intn(len(choices))]
				r.Options.HideHyperthreads = rng.Intn(8) == 0
				if _, err := a.Allocate(r); err == nil {
					live = append(live, r.ID)
				}
				if len(live) > 0 && rng.Intn(5) == 0 {
					k := rng.Intn(len(live))
					code := int32(1)
					a.Stop(live[k], &code) // a failure: its CPUs are held for its next run
					live = append(live[:k], live[k+1:]...)
				}
			}
			checkInvariants(t, a)
			before, holds := a.Assignments(), a.Holds()
			require.NotEmpty(t, holds, "the run left holds to restore")

			b := newAllocator(t, name, cfg)
			var repin []Remembered
			for i, as := range before {
				r := Remembered{Assignment: as, RunsOn: as.CPUs}
				if pools.IsExclusive(as.Pool) && i%2 == 1 {
					r.RunsOn = cpuset.New() // the runtime lets it run on every CPU
				}
				_, outcome, err := b.Readmit(r)
				require.NoError(t, err, as.ID)
				if outcome == NeedsRepin {
					repin = append(repin, r)
					continue
				}
				require.Equal(t, Kept, outcome, as.ID)
			}
			for _, h := range holds {
				_, err := b.RestoreHold(h)
				require.NoError(t, err, "hold of %s", h.ID)
			}
			for _, r := range repin {
				_, outcome, err := b.Repin(r)
				require.NoError(t, err, r.Assignment.ID)
				require.Equal(t, Repinned, outcome, r.Assignment.ID)
			}
			checkInvariants(t, b)
			for _, as := range before {
				got, ok := b.Get(as.ID)
				require.True(t, ok, as.ID)
				if pools.IsExclusive(as.Pool) {
					assert.Equal(t, as.CPUs.String(), got.CPUs.String(), "%s gets its CPUs back", as.ID)
					assert.Equal(t, as.Reserved.String(), got.Reserved.String(), "%s keeps its idle siblings", as.ID)
				}
			}
			assert.Equal(t, len(holds), len(b.Holds()), "every hold restored")
			for _, p := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
				assert.Equal(t, a.FreeCPUs(p).String(), b.FreeCPUs(p).String(), "the same free %s CPUs", p)
			}
		})
	}
}
