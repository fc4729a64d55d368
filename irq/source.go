package irq

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// Owner is the Source's name in the journal of original values.
const Owner = "irq"

// Config says where the Source finds the node.
type Config struct {
	// ProcRoot is where procfs is mounted ("/proc"); a fixture tree in
	// tests.
	ProcRoot string
	// SysfsRoot holds sys/devices/system/cpu ("/").
	SysfsRoot string
	// IrqbalanceDir holds irqbalance's control sockets ("/run/irqbalance");
	// empty leaves irqbalance alone.
	IrqbalanceDir string
	// LeaveIrqbalance tells irqbalance no new ban (irq.irqbalance: off);
	// a ban an earlier process told it, which the journal records
	// (IrqbalancePath), is still undone through IrqbalanceDir.
	LeaveIrqbalance bool
	// Online are the node's online CPUs.
	Online cpuset.CPUSet
	// NodeCPUs are the CPUs of each NUMA node, for IRQs whose affinity
	// was entirely banned.
	NodeCPUs map[int]cpuset.CPUSet
	// Banned, when set, is asked for the CPUs to keep IRQs off at each
	// pass (on the reconciler's goroutine); SetBanned replaces it.
	Banned func() cpuset.CPUSet
}

// Source is the hostfiles.Source of IRQ affinities.
type Source struct {
	cfg Config
	log *logrus.Logger

	mu     sync.Mutex // guards banned and last: SetBanned runs on reply paths
	banned func() cpuset.CPUSet
	last   cpuset.CPUSet

	irqbalance *irqbalance

	// irqs are the IRQ numbers /proc/irq listed when a pass last looked,
	// ascending; listed says whether one has looked since the last
	// rescan or grant (planned). An IRQ appears or goes only when a
	// driver requests or frees it: a pass kicked by a change that bans no
	// CPU anew plans the IRQs known, and each rescan lists them anew
	// (Rescan), as it finds an IRQ of a driver loaded after the pod
	// started. An IRQ freed meanwhile is a file gone, which the pass
	// handles. Only the reconciler's goroutine uses them (Plan, Rescan).
	irqs   []int
	listed bool
	// planned is the banned set of the last Plan that succeeded. When
	// the banned set gains a CPU over it (a grant), the Plan lists
	// /proc/irq again and has every affinity read (Plan.Reread): since
	// the last read, irqbalance may have placed an IRQ on that CPU, which
	// was allowed then, and a driver may have requested one there (a
	// DPDK pod's vfio vectors); the grant's pass must move them off, not
	// the next rescan. A pass that bans nothing new (a shared container's
	// creation, a release) plans the IRQs known, settled as they were.
	planned cpuset.CPUSet

	// deferred follows the IRQs moved off banned CPUs whose move the
	// kernel deferred (deferred.go).
	deferred deferredMoves

	// inherit is what an IRQ requested during a ban inherited from the
	// narrowed default_smp_affinity (inherit.go).
	inherit inheritance

	// own is what the plugin wrote to each IRQ (ownwrites.go).
	own ownWrites
}

var (
	_ hostfiles.Source     = (*Source)(nil)
	_ hostfiles.Explainer  = (*Source)(nil)
	_ hostfiles.Identifier = (*Source)(nil)
	_ hostfiles.Rescanner  = (*Source)(nil)
	_ hostfiles.Tightener  = (*Source)(nil)
)

// Tightens tells whether a CPU is banned now that the last Plan did not
// ban (hostfiles.Tightener): a new exclusive container's CPUs, which take
// device IRQs until the pass moves them off. Its pass is then not put off
// by the spacing after a long pass. A release is not: it leaves no gap.
func (s *Source) Tightens() bool {
	s.mu.Lock()
	get := s.banned
	s.mu.Unlock()
	return !get().IsSubsetOf(s.planned)
}

// Rescan makes the next Plan list /proc/irq anew (hostfiles.Rescanner).
func (s *Source) Rescan() { s.listed = false }

// NewSource returns a Source that bans nothing until SetBanned.
func NewSource(cfg Config, log *logrus.Logger) *Source {
	s := &Source{cfg: cfg, log: log, banned: cfg.Banned, last: cpuset.New(), planned: cpuset.New(), deferred: deferredMoves{pending: map[int]deferredMove{}}, own: newOwnWrites()}
	if s.banned == nil {
		s.banned = func() cpuset.CPUSet { return cpuset.New() }
	}
	if cfg.IrqbalanceDir != "" {
		s.irqbalance = newIrqbalance(cfg, log)
	}
	return s
}

// SetBanned sets the CPUs to keep IRQs off. It only stores the set: the
// caller then kicks the reconciler.
func (s *Source) SetBanned(cpus cpuset.CPUSet) {
	s.mu.Lock()
	s.banned = func() cpuset.CPUSet { return cpus }
	s.mu.Unlock()
}

// LastBanned is the set the last pass kept IRQs off.
func (s *Source) LastBanned() cpuset.CPUSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Owner names the Source in the journal.
func (s *Source) Owner() string { return Owner }

// Plan lists default_smp_affinity and every IRQ's smp_affinity_list while
// CPUs are banned, and irqbalance's banned CPUs (IrqbalancePath, written
// before them and restored after them); with none banned it wants
// nothing, so the reconciler restores what it changed.
func (s *Source) Plan() (hostfiles.Plan, error) {
	s.mu.Lock()
	get := s.banned
	s.mu.Unlock()
	banned := get()
	s.mu.Lock()
	s.last = banned
	s.mu.Unlock()
	var plan hostfiles.Plan
	if banned.IsEmpty() {
		s.planned = banned
		s.deferred.forget()
		s.inherit.end()
		s.own.forget()
		return plan, nil
	}
	plan.Reread = !banned.IsSubsetOf(s.planned)
	if !banned.Equals(s.planned) {
		s.own.banChanged()
	}
	root := filepath.Join(s.cfg.ProcRoot, "irq")
	if !s.listed || plan.Reread {
		irqs, err := ListIRQs(root)
		if err != nil {
			return hostfiles.Plan{}, err
		}
		s.irqs, s.listed = irqs, true
		s.inherit.relisted(irqs)
		s.own.relisted(irqs)
	}
	s.inherit.begin(s.irqs)
	// Most IRQs share a handful of affinities ("0-383", a node's CPUs): a
	// pass works each distinct one out once, not once per IRQ: parsing
	// 512 lists into sets, twice each, was a large share of a pass's CPU
	// (issue 45's profile), taken from the creations it runs beside.
	// Whoever asked for the plan calls its functions, from one goroutine.
	memo := irqMemo{avoids: map[string]bool{}, want: map[string]irqWant{}}
	avoids := func(content, _ string) bool {
		ok, seen := memo.avoids[content]
		if !seen {
			ok = avoidsBanned(cpulist.Parse(content))(banned)
			memo.avoids[content] = ok
		}
		return ok
	}
	if s.irqbalance != nil && !s.cfg.LeaveIrqbalance {
		plan.Changes = append(plan.Changes, s.irqbalance.change(banned))
	}
	plan.Changes = append(plan.Changes, hostfiles.Change{
		Path: filepath.Join(root, "default_smp_affinity"),
		Want: func(original string) (string, error) {
			orig, err := ParseMask(original)
			if err != nil {
				return "", err
			}
			want, err := s.allowed(orig, banned, -1)
			if err != nil {
				return "", err
			}
			s.inherit.defaults(orig, want)
			return FormatMask(want, original)
		},
		// Avoiding the banned CPUs is not enough: a default narrowed for
		// an earlier, larger ban avoids the CPUs banned now too, and would
		// keep a released CPU from the IRQs requested from then on (which,
		// not on the narrowed default computed here, would take that as
		// their original). It must name every CPU of the want too; the
		// kernel shows the default as written.
		Satisfied: func(content, want string) bool {
			have, err := ParseMask(content)
			if !avoidsBanned(have, err)(banned) {
				return false
			}
			wanted, err := ParseMask(want)
			return err == nil && wanted.IsSubsetOf(have)
		},
	})
	// The IRQs this pass moves, and at the first pass those an earlier
	// process moved, are checked for a move the kernel deferred after
	// the writes (deferred.go).
	wrote := func(path string) {
		s.deferred.noteWritten(path)
		s.own.written(path)
	}
	sweeping := !s.deferred.swept
	for _, n := range s.irqs {
		dir := filepath.Join(root, strconv.Itoa(n))
		satisfied := avoids
		if s.own.earlier(n) {
			// Its value may be the plugin's write for an earlier,
			// larger ban (ownwrites.go).
			satisfied = func(content, want string) bool {
				return avoids(content, want) && s.own.satisfied(n, content, want)
			}
		}
		plan.Changes = append(plan.Changes, hostfiles.Change{
			Path: filepath.Join(dir, "smp_affinity_list"),
			Want: func(original string) (string, error) {
				w, seen := memo.want[original]
				if !seen {
					var nodeRule bool
					w, nodeRule = s.irqWant(original, banned, dir)
					if !nodeRule {
						memo.want[original] = w
					}
				}
				if w.moved && sweeping {
					s.deferred.sweep = append(s.deferred.sweep, n)
				}
				s.own.want(n, w.value)
				return w.value, w.err
			},
			Satisfied: satisfied,
			Wrote:     wrote,
			Original:  s.inheritedOriginal(n, dir),
		})
	}
	plan.After = func() error {
		s.checkDeferred(banned)
		return nil
	}
	s.planned = banned
	return plan, nil
}

// ListIRQs is the IRQ numbers /proc/irq (root) has, ascending: its
// directories named by a number.
func ListIRQs(root string) ([]int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("listing IRQs: %w", err)
	}
	var irqs []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n >= 0 {
			irqs = append(irqs, n)
		}
	}
	slices.Sort(irqs)
	return irqs, nil
}

// irqMemo is what one plan worked out per distinct affinity.
type irqMemo struct {
	avoids map[string]bool
	want   map[string]irqWant // by original, when the IRQ's node did not matter
}

type irqWant struct {
	value string
	err   error
	// moved: the original names a banned CPU: the plugin moves the IRQ
	// off it.
	moved bool
}

// irqWant is the affinity the IRQ of directory dir with an original
// affinity gets (allowed). nodeRule tells that it depended on the IRQ's
// node: nothing of the original was left (rare; its node file is read
// only then).
func (s *Source) irqWant(original string, banned cpuset.CPUSet, dir string) (w irqWant, nodeRule bool) {
	orig, err := cpulist.Parse(original)
	if err != nil {
		return irqWant{err: err}, false
	}
	w.moved = !orig.Intersection(banned).IsEmpty()
	if want := orig.Difference(banned); !want.IsEmpty() {
		w.value = want.String()
		return w, false
	}
	want, err := s.allowed(orig, banned, irqNode(dir))
	if err != nil {
		w.err = err
		return w, true
	}
	w.value = want.String()
	return w, true
}

// allowed is an original affinity without the banned CPUs, or, when
// nothing is left, the rule of the package comment.
func (s *Source) allowed(orig, banned cpuset.CPUSet, node int) (cpuset.CPUSet, error) {
	if want := orig.Difference(banned); !want.IsEmpty() {
		return want, nil
	}
	if cpus, ok := s.cfg.NodeCPUs[node]; ok {
		if want := cpus.Intersection(s.cfg.Online).Difference(banned); !want.IsEmpty() {
			return want, nil
		}
	}
	if want := s.cfg.Online.Difference(banned); !want.IsEmpty() {
		return want, nil
	}
	return cpuset.New(), fmt.Errorf("every online CPU (%s) is banned; left as it is", s.cfg.Online)
}

// avoidsBanned tells whether a parsed affinity is usable as it is: not
// empty and without a banned CPU. A value that does not parse is not.
func avoidsBanned(set cpuset.CPUSet, err error) func(banned cpuset.CPUSet) bool {
	return func(banned cpuset.CPUSet) bool {
		return err == nil && !set.IsEmpty() && set.Intersection(banned).IsEmpty()
	}
}

// irqNode is the NUMA node of an IRQ's device, -1 when unknown.
func irqNode(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, "node"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return -1
	}
	return n
}

// Explain hints at the cause of a permanent refusal.
func (s *Source) Explain(path string, err error) string {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errno == syscall.EIO || errno == syscall.EPERM:
		return "a kernel-managed or per-CPU IRQ: its affinity cannot be set from user space; isolcpus=managed_irq keeps managed IRQs off isolated CPUs where it can"
	case errno == syscall.EROFS:
		// systemd keeps /proc/irq read-only under ProtectKernelTunables=
		// even with ReadWritePaths=/proc/irq (the same path as its own
		// read-only entry): the packaged unit lists what it protects instead.
		return "/proc/irq is read-only here: a systemd unit needs ReadWritePaths=/proc/irq and no ProtectKernelTunables= (which keeps /proc/irq read-only even so; list its other paths in ReadOnlyPaths= as the packaged unit does)"
	case errno == syscall.EINVAL || errno == syscall.EOVERFLOW:
		return "the kernel rejects this mask for this IRQ"
	case errno == 0 && strings.HasSuffix(path, "default_smp_affinity"):
		return "default_smp_affinity could not be read as a CPU mask"
	}
	return ""
}

// Identity names the device an IRQ's affinity file belongs to: the names
// of the IRQ's handlers, which the kernel lists as the directories of
// /proc/irq/N (one per action: "nvme0q2", "eth0-rx-0"), sorted and joined
// with commas. An IRQ number freed and given to another device names
// other handlers, and its journaled original is the old device's; a
// shared IRQ that keeps one of its handlers is the same IRQ. ""
// (unknown) for default_smp_affinity, and for an IRQ without a handler
// now or whose directory cannot be read.
func (s *Source) Identity(path string) string {
	if path == IrqbalancePath && s.irqbalance != nil {
		return s.irqbalance.identity()
	}
	if filepath.Base(path) != "smp_affinity_list" {
		return ""
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return ""
	}
	var actions []string
	for _, e := range entries {
		if e.IsDir() {
			actions = append(actions, e.Name())
		}
	}
	slices.Sort(actions)
	return strings.Join(actions, ",")
}

// Irqbalance reports what the Source knows of irqbalance, for status and
// the audit.
func (s *Source) Irqbalance() IrqbalanceStatus {
	if s.irqbalance == nil {
		return IrqbalanceStatus{}
	}
	return s.irqbalance.status()
}
