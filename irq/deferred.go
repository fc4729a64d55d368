package irq

// Moves the kernel deferred. On x86 the kernel does not move an IRQ whose
// previous move is incomplete (no interrupt has arrived on its new vector
// since): it keeps the new affinity pending until the IRQ next fires, and
// that interrupt is still taken on the CPU the IRQ targets.
// smp_affinity_list already reads the new mask, so the pass sees the IRQ
// moved; effective_affinity_list still names the banned CPU. Nothing from
// user space completes the move (writing the mask again leaves it
// pending), so the Source does not try: it counts such IRQs
// (MovesPending, a metric) and logs each once, and sees at a later pass
// that the move completed.
//
// Only the IRQs a pass moves are read (Change.Wrote), those found pending
// at every pass until their move completes, and at the first pass that
// bans CPUs those an earlier process moved (their move may be pending
// still): never every IRQ at every pass.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// deferredMoves is what the Source knows of the moves the kernel deferred.
// Only the reconciler's goroutine uses it, but count, which the metrics
// read.
type deferredMoves struct {
	// written are the IRQs the pass wrote (Change.Wrote); sweep those
	// the first pass found moved off banned CPUs (by this process or an
	// earlier one), swept that it was checked.
	written, sweep []int
	swept          bool
	// pending are the IRQs whose move is deferred, with the masks logged.
	pending map[int]deferredMove
	count   atomic.Int64
	// buf is where routedElsewhere reads.
	buf [32]byte
	// noFileTold: the kernel shows no effective affinity (no
	// effective_affinity_list: a kernel without
	// CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK); logged once.
	noFileTold bool
}

// deferredMove is an IRQ's affinity and effective affinity while its move
// is deferred.
type deferredMove struct{ affinity, effective string }

// MovesPending counts the IRQs moved off banned CPUs whose move the kernel
// deferred, as of the last pass: their next interrupt is taken on a
// banned CPU.
func (s *Source) MovesPending() int { return int(s.deferred.count.Load()) }

// noteWritten is Change.Wrote of an IRQ's smp_affinity_list.
func (d *deferredMoves) noteWritten(path string) {
	if n, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
		d.written = append(d.written, n)
	}
}

// forget drops what is followed: no CPU is banned any more, and every IRQ
// gets its original affinity back (an earlier process's moves too: no
// sweep is needed after).
func (d *deferredMoves) forget() {
	d.written, d.sweep, d.swept = d.written[:0], nil, true
	clear(d.pending)
	d.count.Store(0)
}

// checkDeferred reads the effective affinity of the IRQs the pass moved
// (and swept) and of those pending, after the pass's writes (Plan.After).
// It never fails the pass: what it cannot read is unknown, not pending.
func (s *Source) checkDeferred(banned cpuset.CPUSet) {
	d := &s.deferred
	irqs := append(d.written, d.sweep...)
	for n := range d.pending {
		irqs = append(irqs, n)
	}
	slices.Sort(irqs)
	root := filepath.Join(s.cfg.ProcRoot, "irq")
	for _, n := range slices.Compact(irqs) {
		s.checkDeferredIRQ(root, n, banned)
	}
	d.written, d.sweep, d.swept = d.written[:0], nil, true
	d.count.Store(int64(len(d.pending)))
}

// checkDeferredIRQ notes whether IRQ n's move off the banned CPUs is
// deferred: its affinity avoids them, its effective affinity does not.
func (s *Source) checkDeferredIRQ(root string, n int, banned cpuset.CPUSet) {
	d := &s.deferred
	prev, was := d.pending[n]
	if !was && d.routedElsewhere(root, n, banned) {
		return
	}
	dir := filepath.Join(root, strconv.Itoa(n))
	effectivePath := filepath.Join(dir, "effective_affinity_list")
	delete(d.pending, n)
	effective, err := ReadCPUList(effectivePath)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warnf("irq: IRQ %d: %v; whether its move off CPUs %s is complete is unknown", n, err, banned)
		} else if _, statErr := os.Stat(dir); statErr == nil && !d.noFileTold {
			d.noFileTold = true
			s.log.Infof("irq: the kernel shows no effective affinity of IRQs (no %s: a kernel without CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK): an IRQ moved off a banned CPU whose move it deferred is not counted in cpupool_irq_moves_pending", filepath.Join(dir, "effective_affinity_list"))
		}
		return
	}
	routed := effective.Set.Intersection(banned)
	if routed.IsEmpty() {
		switch {
		case !was:
		case effective.Text != prev.effective:
			s.log.Infof("irq: IRQ %d (%s): its deferred move completed: it is routed to CPUs %s now, not %s", n, s.names(dir), effective.Text, prev.effective)
		default:
			// The kernel moved nothing: the CPUs it is still routed to
			// were given back (their container ended), so the move is no
			// longer wanted, and is not a completion.
			s.log.Infof("irq: IRQ %d (%s): its deferred move is no longer needed: CPUs %s, where it is still routed, are no longer kept free of IRQs", n, s.names(dir), effective.Text)
		}
		return
	}
	affinity, err := ReadCPUList(filepath.Join(dir, "smp_affinity_list"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warnf("irq: IRQ %d: %v", n, err)
		}
		return
	}
	if !affinity.Set.Intersection(banned).IsEmpty() {
		return // not moved: refused (a managed IRQ), or to be moved by the next pass
	}
	m := deferredMove{affinity: affinity.Text, effective: effective.Text}
	d.pending[n] = m
	if !was || prev != m {
		s.log.Infof("irq: IRQ %d (%s): moved off the banned CPUs, but the kernel deferred the move until the IRQ next fires (its previous move was incomplete): "+
			"smp_affinity_list %s, effective_affinity_list %s; its next interrupt is taken on CPU %s, and completes the move; nothing from user space can",
			n, s.names(dir), m.affinity, m.effective, routed)
	}
}

// routedElsewhere tells, cheaply, that an IRQ's effective affinity is
// one CPU that is not banned: what nearly every IRQ a pass moves shows
// (x86 routes an IRQ to one CPU). A pass may move hundreds of IRQs; the
// file is read into a buffer kept between calls, and parsed without
// building sets. false is anything else (a list, a banned CPU, an error),
// which the full read handles.
func (d *deferredMoves) routedElsewhere(root string, irq int, banned cpuset.CPUSet) bool {
	// What os.ReadFile allocates (the File, its buffer) was most of what
	// this check added to a pass: the file is read with the system calls.
	path := root + string(filepath.Separator) + strconv.Itoa(irq) + string(filepath.Separator) + "effective_affinity_list"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	n, err := syscall.Read(fd, d.buf[:])
	for err == syscall.EINTR {
		n, err = syscall.Read(fd, d.buf[:])
	}
	if err != nil || n == len(d.buf) { // a longer list: the full read
		return false
	}
	cpu, ok := singleCPU(d.buf[:n])
	return ok && !banned.Contains(cpu)
}

// singleCPU is the CPU of a list that names one ("5\n"), without
// allocating.
func singleCPU(b []byte) (int, bool) {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || len(b) > 5 {
		return 0, false
	}
	cpu := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		cpu = cpu*10 + int(c-'0')
	}
	return cpu, true
}

// names are the IRQ's handlers (Identity), "no handler" when none.
func (s *Source) names(dir string) string {
	if id := s.Identity(filepath.Join(dir, "smp_affinity_list")); id != "" {
		return id
	}
	return "no handler"
}

// CPUList is a CPU list file of /proc/irq/N (smp_affinity_list,
// effective_affinity_list): its text, as the kernel wrote it, and its set.
type CPUList struct {
	Text string
	Set  cpuset.CPUSet
}

// MalformedListError is a /proc/irq file whose content is no CPU list.
type MalformedListError struct {
	Path string
	Err  error
}

func (e *MalformedListError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *MalformedListError) Unwrap() error { return e.Err }

// ReadCPUList reads a CPU list file of /proc/irq/N. A read error is
// returned as it is (fs.ErrNotExist: no such file, or the IRQ freed);
// content that is no CPU list is a *MalformedListError naming the file.
func ReadCPUList(path string) (CPUList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return CPUList{}, err
	}
	text := strings.TrimSpace(string(data))
	set, err := cpulist.Parse(text)
	if err != nil {
		return CPUList{}, &MalformedListError{Path: path, Err: err}
	}
	return CPUList{Text: text, Set: set}, nil
}
