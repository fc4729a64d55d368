package irq

// The affinities the plugin wrote. An IRQ whose affinity avoids the
// banned CPUs is left alone: irqbalance may have placed it on one allowed
// CPU, and that placement is its business. But a value the plugin itself
// wrote for an earlier, larger ban avoids a smaller one too, and left as
// it is keeps the released CPUs off that IRQ until the next ban that
// touches it, or, on a node where some CPU is always held, for good. So
// an IRQ still holding the plugin's last write must hold this ban's want
// (its original less the CPUs banned now): each released CPU gets its
// IRQs back at the pass that releases it.
//
// Only what this process wrote is known: after a restart, an IRQ a
// previous process narrowed for a ban since released keeps that value
// until a ban touches it or nothing is banned (then it is restored from
// the journal).

import (
	"path/filepath"
	"strconv"
)

// ownWrites is, per IRQ, the value the plugin wrote last and under which
// banned set (gen), and what the current pass wants (wanted, to learn
// what a write wrote). gen counts the banned sets the passes planned: an
// IRQ written under the banned set planned now holds this ban's want, and
// needs no more than the check that it avoids the banned CPUs (no closure
// of its own: a steady pass plans 512 IRQs and more). Only the
// reconciler's goroutine uses it.
type ownWrites struct {
	wanted map[int]string
	wrote  map[int]ownWrite
	gen    uint64
}

type ownWrite struct {
	value string
	gen   uint64
}

func newOwnWrites() ownWrites {
	return ownWrites{wanted: map[int]string{}, wrote: map[int]ownWrite{}}
}

// banChanged notes that the pass plans another banned set than the last.
func (o *ownWrites) banChanged() { o.gen++ }

// want notes what the pass wants IRQ n to hold.
func (o *ownWrites) want(n int, value string) { o.wanted[n] = value }

// written notes that the pass wrote its want to the IRQ's
// smp_affinity_list (path).
func (o *ownWrites) written(path string) {
	n, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
	if err != nil {
		return
	}
	if v, ok := o.wanted[n]; ok {
		o.wrote[n] = ownWrite{value: v, gen: o.gen}
	}
}

// earlier tells whether IRQ n was written by the plugin under another
// banned set than the one planned now.
func (o *ownWrites) earlier(n int) bool {
	w, ok := o.wrote[n]
	return ok && w.gen != o.gen
}

// satisfied tells whether IRQ n's content meets want, given that it
// avoids the banned CPUs: a value another program wrote does, and the
// record goes (irqbalance moved the IRQ, or a restore put its original
// back: the plugin's write is no longer there to undo, and a record kept
// made every later steady pass check the IRQ with a closure of its own);
// the plugin's own write for an earlier ban only when it is the want
// (then it counts as written under this ban).
func (o *ownWrites) satisfied(n int, content, want string) bool {
	w, ok := o.wrote[n]
	switch {
	case !ok:
		return true
	case w.value != content:
		delete(o.wrote, n)
		return true
	case content == want:
		o.wrote[n] = ownWrite{value: w.value, gen: o.gen}
		return true
	}
	return false
}

// relisted drops the IRQs /proc/irq no longer lists.
func (o *ownWrites) relisted(irqs []int) {
	if len(o.wrote) == 0 && len(o.wanted) == 0 {
		return
	}
	listed := make(map[int]bool, len(irqs))
	for _, n := range irqs {
		listed[n] = true
	}
	for n := range o.wrote {
		if !listed[n] {
			delete(o.wrote, n)
		}
	}
	for n := range o.wanted {
		if !listed[n] {
			delete(o.wanted, n)
		}
	}
}

// forget drops everything: nothing is banned, every IRQ gets its original
// back.
func (o *ownWrites) forget() {
	clear(o.wanted)
	clear(o.wrote)
}
