package irq

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// affinities is every IRQ's smp_affinity_list and default_smp_affinity.
func (n *node) affinities(spec procfixture.Spec) map[string]string {
	n.t.Helper()
	out := map[string]string{"default": n.defaultAffinity()}
	for _, irq := range spec.IRQs {
		out[fmt.Sprint(irq.N)] = n.affinity(fmt.Sprint(irq.N))
	}
	return out
}

// TestReleasedCPUGetsIRQsBackWhileAnotherStaysBanned: CPUs 2 and 3 are
// banned (two exclusive containers), then 2 is released while 3 stays.
// The IRQs the plugin narrowed to 0-1,4-7 still avoid 3, but that value
// is the plugin's own write for a ban that is gone: each becomes its
// original less 3. Left as they were, a released CPU got no IRQ back as
// long as any CPU of the node stayed banned (on a busy node: for good),
// and the banned sets written grew with every container ever run.
func TestReleasedCPUGetsIRQsBackWhileAnotherStaysBanned(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(2, 3)
	require.Equal(t, "0-1,4-7", n.affinity("24"))
	require.Equal(t, "0-1", n.affinity("28"))
	n.setAffinity("0", "5") // irqbalance's placement within the allowed CPUs
	n.ban(3)
	assert.Equal(t, "0-2,4-7", n.affinity("24"), "CPU 2 is released: its IRQs may run there again")
	assert.Equal(t, "2", n.affinity("28"), "its original less 3")
	assert.Equal(t, "0-2,4-7", n.affinity("27"), "pinned to 3 alone: every free CPU, now with 2")
	assert.Equal(t, "f7", n.defaultAffinity())
	assert.Equal(t, "5", n.affinity("0"), "another program's value that avoids the ban is its business")
	writes := n.r.Status().Writes
	require.NoError(t, n.r.Flush())
	assert.Equal(t, writes, n.r.Status().Writes, "a pass with the same ban writes nothing")
	n.ban()
	for irq, want := range map[string]string{"0": "0-7", "24": "0-7", "25": "2", "26": "6", "27": "3", "28": "2-3"} {
		assert.Equal(t, want, n.affinity(irq), "IRQ %s restored", irq)
	}
	assert.Equal(t, "ff", n.defaultAffinity())
}

// TestBannedSetFollowsTheLiveContainers: one exclusive container stays
// on CPU 7 while others, one at a time, each take a CPU and give it
// back, and then a burst of them (created and removed with only some
// passes between). After each, the IRQs avoid exactly the CPUs held now,
// no more; at the end, with none held, every affinity is what it was
// before the first ban.
func TestBannedSetFollowsTheLiveContainers(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	before := n.affinities(spec)
	held := func(cpus ...int) {
		t.Helper()
		n.ban(cpus...)
		banned := cpuset.New(cpus...)
		all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
		assert.Equal(t, all.Difference(banned).String(), n.affinity("24"), "IRQ 24 (original 0-7) while %s is held", banned)
		assert.Equal(t, all.Difference(banned).String(), n.affinity("0"), "the timer (original 0-7) while %s is held", banned)
	}
	for _, cpu := range []int{1, 2, 3, 4, 5, 6, 1, 5} {
		held(7, cpu)
		held(7)
	}
	// A burst: the bans change without a pass in between, then a pass.
	for i := range 50 {
		n.src.SetBanned(cpuset.New(7, i%7))
		if i%9 == 0 {
			require.NoError(t, n.r.Flush())
		}
	}
	n.src.SetBanned(cpuset.New(7))
	require.NoError(t, n.r.Flush())
	assert.Equal(t, "0-6", n.affinity("24"))
	assert.Equal(t, "0-6", n.affinity("0"))
	assert.Equal(t, cpuset.New(7), n.src.LastBanned())
	n.ban()
	assert.Equal(t, before, n.affinities(spec), "every affinity restored exactly")
	assert.Empty(t, n.r.Status().Records[Owner])
}
