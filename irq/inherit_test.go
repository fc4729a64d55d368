package irq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// TestLateIRQListedAfterTheBanChangedIsRestored: an IRQ requested while
// CPUs 2 and 3 are banned starts on the narrowed default (f3, so 0-1,4-7).
// Before any pass lists it (a release pass lists nothing; the next
// listing is a grant or the rescan), CPU 2 is released and the default
// becomes f7. The IRQ still holds what the kernel gave it from the
// plugin's earlier default: like the plugin's own earlier write, it must
// become its original (what the default's original gives, 0-7) less the
// CPUs banned now, and get 0-7 back when nothing is banned.
func TestLateIRQListedAfterTheBanChangedIsRestored(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	n.ban(2, 3)
	require.Equal(t, "f3", n.defaultAffinity())
	narrowed := cpuset.New(0, 1, 4, 5, 6, 7)
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, DefaultAffinity: &narrowed,
		IRQs: []procfixture.IRQ{{N: 40, Affinity: narrowed, Node: -1, Description: "PCI-MSI 1-edge ice-vf0"}}})
	n.ban(3) // the release's pass and the listing of IRQ 40 (Flush lists)
	assert.Equal(t, "f7", n.defaultAffinity())
	assert.Equal(t, "0-2,4-7", n.affinity("40"), "CPU 2 released: the IRQ requested under the earlier default gets it")
	n.ban()
	assert.Equal(t, "0-7", n.affinity("40"), "what the kernel would have given it without the plugin's default")
}

// TestLateIRQListedAtAGrantIsRestored: the same IRQ, listed first at a
// grant of CPU 5 (a pass that lists /proc/irq): it is recorded with what
// the kernel gave it from the earlier narrowed default as its original,
// and "restored" to that narrowed set when nothing is banned any more.
func TestLateIRQListedAtAGrantIsRestored(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	n.ban(2, 3)
	narrowed := cpuset.New(0, 1, 4, 5, 6, 7)
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, DefaultAffinity: &narrowed,
		IRQs: []procfixture.IRQ{{N: 40, Affinity: narrowed, Node: -1, Description: "PCI-MSI 1-edge ice-vf0"}}})
	n.ban(2, 3, 5)
	assert.Equal(t, "0-1,4,6-7", n.affinity("40"))
	n.ban()
	assert.Equal(t, "ff", n.defaultAffinity())
	assert.Equal(t, "0-7", n.affinity("40"), "what the kernel would have given it without the plugin's default")
}

// TestIRQOnAnOldNarrowedSetKeepsItsOwn: a narrowed default replaced
// before the listing before last cannot have started an IRQ first listed
// now (each listing lists what was requested before it): an IRQ that
// holds such a set was placed there by someone else, and keeps it as its
// original, as an IRQ there before the ban does.
func TestIRQOnAnOldNarrowedSetKeepsItsOwn(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	n.ban(2, 3)
	n.ban(3)
	require.Equal(t, "f7", n.defaultAffinity())
	require.NoError(t, n.r.Flush()) // two rescans: the listings after the change
	require.NoError(t, n.r.Flush())
	narrowed := cpuset.New(0, 1, 4, 5, 6, 7)
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs,
		IRQs: []procfixture.IRQ{{N: 40, Affinity: narrowed, Node: -1, Description: "PCI-MSI 1-edge ice-vf0"}}})
	require.NoError(t, n.r.Flush())
	n.ban()
	assert.Equal(t, "0-1,4-7", n.affinity("40"), "its own value: no default in force since the last listing gave it")
}

// TestNarrowedDefaultsKeptAreBounded: however many times the default
// changes between two listings, at most maxEarlier are kept.
func TestNarrowedDefaultsKeptAreBounded(t *testing.T) {
	var in inheritance
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	for i := range 200 {
		in.defaults(all, all.Difference(cpuset.New(i%8, (i/8)%8)))
	}
	assert.LessOrEqual(t, len(in.earlier), maxEarlier)
	assert.NotEmpty(t, in.earlier)
	in.relisted(nil)
	in.relisted(nil)
	in.relisted(nil)
	assert.Empty(t, in.earlier, "gone once no IRQ first listed now can have started on them")
}
