package irq

// An IRQ requested while CPUs are banned (a driver loaded, a VF created)
// starts on the default_smp_affinity the plugin narrowed: the kernel
// gives a new IRQ irq_default_affinity ∩ the online CPUs, narrowed to its
// device's NUMA node when that leaves any CPU (irq_setup_affinity). It
// thus avoids the banned CPUs and would never be recorded: when the ban
// ended it kept the narrowed set for good, although default_smp_affinity
// got its original back. Like a thread forked while
// housekeeping confined its parent, such an IRQ takes as its original
// what the kernel would have given it from the default's original
// (hostfiles.Change.Original), and gets that back when the ban ends.
//
// The IRQ is first seen at the next listing of /proc/irq (a grant or the
// rescan), and the ban may have changed since it was requested (a
// release narrows the default less, and lists nothing): it then holds
// what an earlier narrowed default gave it, not the one planned now, and
// taken as its own original it kept that narrowing for good. So the
// narrowed defaults replaced since the listing before last are kept too
// (earlier), and an IRQ matching any of them takes what that default's
// original gives. Between two listings the banned set only shrinks (a
// pass that bans a CPU anew lists), so they are few; maxEarlier bounds
// them all the same.
//
// Only IRQs that appeared after the ban began are taken so: an IRQ
// already there when the default was narrowed (irqbalance or an operator
// may have placed it on exactly such a set) keeps its own value as its
// original. A process that starts while an earlier one's ban holds takes
// the IRQs of its first listing as already there: one requested during
// the earlier process's ban and not yet recorded by it (its next rescan
// records it) keeps the narrowed set. A number a later listing lacks
// was freed and is no longer taken as there before (relisted).

import (
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// inheritance follows the default_smp_affinity of the current ban and
// the IRQs that were there when it began. Only the reconciler's goroutine
// uses it (Plan and the functions of its Changes).
type inheritance struct {
	// before are the IRQs listed when the ban began (nil: no ban).
	before map[int]bool
	// known: orig and narrowed are the default's original and want, as
	// the default's Change of the current pass worked them out; noted:
	// as the last pass that did worked them out (kept across passes, to
	// see the default change).
	known, noted   bool
	orig, narrowed cpuset.CPUSet
	// listings counts the listings of /proc/irq during the ban; earlier
	// are the narrowed defaults replaced since the listing before last,
	// oldest first.
	listings uint64
	earlier  []narrowedDefault
}

// narrowedDefault is a default_smp_affinity the plugin wrote for an
// earlier ban: its original and want, and the last listing that may show
// an IRQ first that started on it.
type narrowedDefault struct {
	orig, narrowed cpuset.CPUSet
	until          uint64
}

// maxEarlier bounds the narrowed defaults kept: an IRQ started on one
// dropped keeps the narrowing as its original.
const maxEarlier = 32

// begin notes the IRQs listed at a pass that bans CPUs: the first such
// pass since nothing was banned keeps them as those that were there
// before the default was narrowed.
func (in *inheritance) begin(irqs []int) {
	in.known = false
	if in.before != nil {
		return
	}
	in.before = make(map[int]bool, len(irqs))
	for _, n := range irqs {
		in.before[n] = true
	}
}

// relisted notes a new listing of /proc/irq during the ban: an IRQ that
// was there before and is not listed now was freed, and its number, when
// requested again (a driver unbound and bound again, a VF re-created:
// the kernel tends to give the same numbers back), is an IRQ started on
// the narrowed default like any new one. A number freed and
// requested again between two listings (a rescan interval) is still
// taken as there before.
func (in *inheritance) relisted(irqs []int) {
	in.listings++
	in.earlier = slices.DeleteFunc(in.earlier, func(d narrowedDefault) bool { return d.until < in.listings })
	if in.before == nil {
		return
	}
	now := make(map[int]bool, len(irqs))
	for _, n := range irqs {
		now[n] = true
	}
	for n := range in.before {
		if !now[n] {
			delete(in.before, n)
		}
	}
}

// end forgets the ban: nothing is banned any more.
func (in *inheritance) end() { *in = inheritance{} }

// defaults notes the default_smp_affinity's original and want. A want
// that replaces another narrowed one keeps that one in earlier: an IRQ
// started on it before this pass writes the new one is listed at the
// next listing at the latest (this pass's listing, if any, came before
// the write); kept one listing longer, as a margin for a pass that
// failed.
func (in *inheritance) defaults(orig, narrowed cpuset.CPUSet) {
	if in.noted && !in.orig.Equals(in.narrowed) && !(orig.Equals(in.orig) && narrowed.Equals(in.narrowed)) {
		in.earlier = slices.DeleteFunc(in.earlier, func(d narrowedDefault) bool {
			return d.orig.Equals(in.orig) && d.narrowed.Equals(in.narrowed)
		})
		if len(in.earlier) == maxEarlier {
			in.earlier = slices.Delete(in.earlier, 0, 1)
		}
		in.earlier = append(in.earlier, narrowedDefault{orig: in.orig, narrowed: in.narrowed, until: in.listings + 2})
	}
	in.known, in.noted, in.orig, in.narrowed = true, true, orig, narrowed
}

// inheritedOriginal is the Change.Original of IRQ n (directory dir): nil
// for an IRQ that was there when the ban began.
func (s *Source) inheritedOriginal(n int, dir string) func(content string) string {
	if s.inherit.before == nil || s.inherit.before[n] {
		return nil
	}
	return func(content string) string { return s.inherited(content, dir) }
}

// inherited is the original of an IRQ first seen holding content: what
// the kernel would have given it from the default's original when content
// is what it gives from the narrowed default (all of it, or its part on
// the IRQ's node), the one planned now or one replaced since the listing
// before last, else content.
func (s *Source) inherited(content, dir string) string {
	in := &s.inherit
	if !in.known && len(in.earlier) == 0 {
		return content
	}
	set, err := cpulist.Parse(content)
	if err != nil {
		return content
	}
	node, nodeRead := -1, false
	from := func(orig, narrowed cpuset.CPUSet) (string, bool) {
		if orig.Equals(narrowed) {
			return "", false
		}
		orig, narrowed = orig.Intersection(s.cfg.Online), narrowed.Intersection(s.cfg.Online)
		if set.Equals(narrowed) {
			return orig.String(), true
		}
		if !set.IsSubsetOf(narrowed) {
			return "", false
		}
		if !nodeRead {
			node, nodeRead = irqNode(dir), true
		}
		cpus, ok := s.cfg.NodeCPUs[node]
		if !ok {
			return "", false
		}
		if on := narrowed.Intersection(cpus); on.IsEmpty() || !set.Equals(on) {
			return "", false
		}
		if wide := orig.Intersection(cpus); !wide.IsEmpty() {
			return wide.String(), true
		}
		return "", false
	}
	if in.known {
		if orig, ok := from(in.orig, in.narrowed); ok {
			return orig
		}
	}
	for i := len(in.earlier) - 1; i >= 0; i-- {
		if orig, ok := from(in.earlier[i].orig, in.earlier[i].narrowed); ok {
			return orig
		}
	}
	return content
}
