package audit

// Device IRQs whose move off a held CPU the kernel deferred: their
// affinity (smp_affinity_list) leaves the CPU out, but the kernel still
// routes them there (effective_affinity_list), until they next fire.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/irq"
)

// PendingMove is a device IRQ whose affinity keeps it off a held CPU while
// the kernel still routes it there.
type PendingMove struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	// Affinity is its smp_affinity_list, Effective its
	// effective_affinity_list: where the kernel routes it now.
	Affinity  string `json:"affinity"`
	Effective string `json:"effectiveAffinity"`
	Reason    string `json:"reason"`
}

// pendingReason says, for people, why an IRQ moved off a CPU still takes
// its next interrupt there (docs/limitations.md has the kernel's side).
const pendingReason = "the kernel deferred its move: its previous move was not complete (no interrupt since on its new vector), " +
	"so the kernel keeps the new affinity pending and applies it only when the IRQ next fires; that interrupt is taken on the CPU it still targets. " +
	"Nothing from user space completes the move (writing the affinity again leaves it pending); it completes on its own at that interrupt"

// readPendingMoves lists /proc/irq and returns, by held CPU, the IRQs
// whose effective affinity names it while their affinity leaves it out;
// descriptions are /proc/interrupts' ends of rows, by IRQ. An IRQ's
// effective_affinity_list that is missing (kernels without
// CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK, some architectures) or unreadable
// is unknown: no finding, and note says so once. One that is not a CPU
// list is an error naming it: the kernel writes none such, so the tree
// read is not what it seems.
//
// The effective affinity is read for every IRQ, the affinity only for
// those whose effective one names a held CPU: few, usually none.
func readPendingMoves(procRoot string, held cpuset.CPUSet, descriptions map[string]string) (byCPU map[int][]PendingMove, note string, err error) {
	if held.IsEmpty() {
		return nil, "", nil
	}
	root := filepath.Join(procRoot, "irq")
	irqs, err := irq.ListIRQs(root)
	if err != nil {
		return nil, fmt.Sprintf("IRQ moves the kernel deferred are not checked: %s: %v", root, err), nil
	}
	var missing, unreadable int
	var firstUnreadable error
	unknown := func(err error) {
		unreadable++
		if firstUnreadable == nil {
			firstUnreadable = err
		}
	}
	byCPU = map[int][]PendingMove{}
	for _, n := range irqs {
		id := strconv.Itoa(n)
		dir := filepath.Join(root, id)
		effective, err := readIRQList(filepath.Join(dir, "effective_affinity_list"))
		var malformed *malformedListError
		switch {
		case errors.As(err, &malformed):
			return nil, "", err
		case errors.Is(err, fs.ErrNotExist):
			if _, gone := os.Stat(dir); gone == nil {
				missing++ // else freed since listed
			}
			continue
		case err != nil:
			unknown(err)
			continue
		}
		routed := effective.Set.Intersection(held)
		if routed.IsEmpty() {
			continue
		}
		affinity, err := readIRQList(filepath.Join(dir, "smp_affinity_list"))
		switch {
		case errors.As(err, &malformed):
			return nil, "", err
		case errors.Is(err, fs.ErrNotExist):
			continue // freed since listed
		case err != nil:
			unknown(err)
			continue
		}
		for _, c := range routed.Difference(affinity.Set).List() {
			byCPU[c] = append(byCPU[c], PendingMove{ID: id, Description: descriptions[id], Affinity: affinity.Text, Effective: effective.Text, Reason: pendingReason})
		}
	}
	var notes []string
	if missing > 0 {
		notes = append(notes, fmt.Sprintf("this kernel shows no effective affinity for %d of %d IRQs (no effective_affinity_list: a kernel without CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK, or an architecture that does not keep it): an IRQ moved off a held CPU whose move the kernel deferred is not found for them", missing, len(irqs)))
	}
	if unreadable > 0 {
		notes = append(notes, fmt.Sprintf("the effective affinity of %d IRQs could not be read (%v): an IRQ moved off a held CPU whose move the kernel deferred is not found for them", unreadable, firstUnreadable))
	}
	return byCPU, strings.Join(notes, "; "), nil
}

// malformedListError is a /proc/irq file that is no CPU list, with how
// to fix it.
type malformedListError struct{ error }

func (e *malformedListError) Unwrap() error { return e.error }

// readIRQList reads a CPU list of /proc/irq/N (irq.ReadCPUList). Content
// that is no CPU list is a *malformedListError naming the file; a read
// error is returned as it is.
func readIRQList(path string) (irq.CPUList, error) {
	l, err := irq.ReadCPUList(path)
	var malformed *irq.MalformedListError
	if errors.As(err, &malformed) {
		return l, &malformedListError{fmt.Errorf("%w; the kernel writes a CPU list there (\"0-3,8\"): check that the proc root (--proc-root, procRoot) is procfs", err)}
	}
	return l, err
}
