package irq

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// TestSteadyPassAfterIrqbalanceMovedTheIRQsMakesNoPerIRQClosure: the
// plugin narrows 200 IRQs for CPUs 2,3; irqbalance then places each on
// CPU 5 (its business); CPU 2 is released. From then on the ban is
// steady, yet every IRQ is still taken as written "under another banned
// set" (its record is kept although the IRQ no longer holds the plugin's
// value), so every steady pass builds a closure per IRQ, which
// ownwrites.go says a steady pass does not. Compared with the same node
// where irqbalance moved nothing.
func TestSteadyPassAfterIrqbalanceMovedTheIRQsMakesNoPerIRQClosure(t *testing.T) {
	allocs := func(moved bool) float64 {
		spec := procfixture.Spec{CPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), BootID: boot}
		for i := range 200 {
			spec.IRQs = append(spec.IRQs, procfixture.IRQ{N: 32 + i, Affinity: spec.CPUs, Node: 0, Description: fmt.Sprint("PCI-MSI edge q", i)})
		}
		n := newNode(t, spec, "")
		n.ban(2, 3)
		if moved {
			for _, irq := range spec.IRQs {
				n.setAffinity(fmt.Sprint(irq.N), "5")
			}
		}
		n.ban(3)
		require.NoError(t, n.r.Flush())
		if moved {
			assert.Equal(t, "5", n.affinity("32"), "irqbalance's placement, which avoids the ban, is its business")
		}
		return testing.AllocsPerRun(20, func() { _, _ = n.src.Plan() })
	}
	quiet, moved := allocs(false), allocs(true)
	assert.InDelta(t, quiet, moved, 20, "a steady pass's allocations (quiet %v, after irqbalance moved the IRQs %v)", quiet, moved)
}
