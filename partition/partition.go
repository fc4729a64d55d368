// Package partition takes exclusive containers' CPUs out of the
// scheduler's load balancing at run time, without isolcpus, by making each
// container's cgroup a remote isolated partition on cgroup v2 (kernel 6.7
// or later; Documentation/admin-guide/cgroup-v2.rst, "cpuset.cpus.partition").
//
// For a container whose cgroup is C with CPUs X, below ancestors A1 … Ak
// (the hierarchy's root excluded):
//
//   - Ai/cpuset.cpus.exclusive gains X, top-down (the kernel requires the
//     exclusive CPUs to be written down the hierarchy before the partition
//     root; each ancestor gets the union of the partitions below it plus
//     what it had);
//   - C/cpuset.cpus.exclusive becomes X;
//   - C/cpuset.cpus.partition becomes "isolated".
//
// Undone in reverse when the container no longer holds the CPUs: C's files
// go back to their originals ("member", empty) or vanish with the cgroup,
// then the ancestors bottom-up, each to exactly what it had. The changes go
// through package hostfiles (originals recorded first, restored exactly,
// also after a crash). A shrinking ancestor or container (another
// partition below it ended, a resize) is written bottom-up, before any
// growing one, so that no parent ever loses CPUs a child still has.
//
// The partition's CPUs stay in the container's cpuset: the pool's
// accounting does not change. A partition the kernel finds invalid (it
// reads "isolated invalid (<reason>)", right after the write or later) is
// left as it is and reported through hostfiles (Change.Verify): logged
// once with the container and the reason, counted as a refused file of
// owner "cpuset", and kept for the audit, until it is valid again or the
// container ends. On cgroup v1, or a kernel without cpuset.cpus.exclusive,
// nothing is written and a warning says why, once.
package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// Owner is the Source's name in the journal of original values.
const Owner = "cpuset"

// Want is one container to isolate.
type Want struct {
	// Dir is the container's cgroup, relative to the unified hierarchy's
	// root ("/kubepods/pod<uid>/<id>").
	Dir  string
	CPUs cpuset.CPUSet
	// Who names the container in warnings.
	Who string
}

// same tells whether o is the same Want as w. A container's plan is kept
// between passes while its Want stays the same (Source.planned), so every
// field a plan is made of belongs here.
func (w Want) same(o Want) bool {
	return w.Dir == o.Dir && w.CPUs.Equals(o.CPUs) && w.Who == o.Who
}

// Source is the hostfiles.Source of isolated partitions.
type Source struct {
	root  string
	wants func() []Want
	log   *logrus.Logger
	// passes counts the Plans (containerPlan.seen).
	passes uint64
	// warned: what cannot be a partition, logged once per cgroup.
	warned *hostfiles.Warnings
	// planned keeps each container's paths and changes between passes,
	// by its cgroup, while its want stays the same: what a pass plans
	// for a container that did not change is then made once, not at
	// every pass (issue 45: a pass's allocations grew with the exclusive
	// containers). Only Plan uses it, and the reconciler runs every
	// pass's Plans under its lock, one pass at a time.
	planned map[string]*containerPlan
	// ancestors keeps each ancestor's change between passes, by its
	// cgroup (relative), while the CPUs of the partitions below it stay
	// the same: with a pod per container, an ancestor per container was
	// otherwise planned anew at every pass (issue 45). Like planned,
	// only Plan uses it.
	ancestors map[string]*ancestorPlan
}

// ancestorPlan is the change Plan makes of an ancestor, a function of the
// CPUs of the partitions below it alone.
type ancestorPlan struct {
	// ids are the CPUs the change was made for, sorted; next gathers this
	// pass's (its slice kept from pass to pass).
	ids, next []int
	change    hostfiles.Change
	// seen: the pass that last had a partition below it (Source.passes).
	seen uint64
}

// containerPlan is what Plan makes of one Want, a function of the Want
// alone.
type containerPlan struct {
	want Want
	// dir is the cgroup's directory, exclusive its exclusive CPUs' file.
	dir, exclusive string
	// ancestors are the cgroup's ancestors below the root (relative).
	ancestors []string
	ids       []int
	changes   [2]hostfiles.Change
	// seen: the pass that last wanted it (Source.passes).
	seen uint64
}

var _ hostfiles.Source = (*Source)(nil)

// NewSource returns a Source below cgroupRoot; wants is asked for the
// containers to isolate at each pass.
func NewSource(cgroupRoot string, wants func() []Want, log *logrus.Logger) *Source {
	return &Source{root: cgroupRoot, wants: wants, log: log, warned: hostfiles.NewWarnings(log)}
}

// Owner names the Source in the journal.
func (s *Source) Owner() string { return Owner }

// Supported tells whether the hierarchy below root can make remote
// partitions, and if not, why.
func Supported(root string) (bool, string) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		return false, "cgroup v1: isolated partitions need the unified hierarchy (cgroup v2)"
	}
	return true, ""
}

const (
	exclusiveFile = "cpuset.cpus.exclusive"
	partitionFile = "cpuset.cpus.partition"
)

// Plan lists, for the containers to isolate whose cgroups exist, their
// ancestors' and their own exclusive CPUs and partition type.
func (s *Source) Plan() (hostfiles.Plan, error) {
	wants := s.wants()
	if len(wants) == 0 {
		s.planned, s.ancestors = nil, nil
		return hostfiles.Plan{}, nil
	}
	if ok, why := Supported(s.root); !ok {
		for _, w := range wants {
			s.warned.Once(w.Dir, fmt.Sprintf("container %s: not in an isolated partition: %s; its CPUs stay in the scheduler's load balancing unless isolcpus covers them", w.Who, why))
		}
		return hostfiles.Plan{}, nil
	}
	// Each ancestor's CPUs, those of the partitions below it, are
	// gathered in a list (ancestorPlan.next) and made a set once each,
	// when they changed (a union per container made a set the size of
	// the ancestor's per container: a pass's allocations grew with the
	// square of the exclusive containers under the pods' common
	// ancestor; issue 45).
	var plan hostfiles.Plan
	if s.planned == nil {
		s.planned = map[string]*containerPlan{}
		s.ancestors = map[string]*ancestorPlan{}
	}
	s.passes++
	for _, w := range slices.SortedFunc(slices.Values(wants), func(a, b Want) int { return strings.Compare(a.Dir, b.Dir) }) {
		c := s.planned[w.Dir]
		if c == nil || !c.want.same(w) {
			c = s.containerPlan(w)
			s.planned[w.Dir] = c
		}
		c.seen = s.passes
		if !exists(c.exclusive) {
			if !exists(c.dir) {
				// Not created yet: the runtime creates it after the reply.
				plan.Pending = true
				continue
			}
			s.warned.Once(w.Dir, fmt.Sprintf("container %s: not in an isolated partition: %s has no %s (it needs Linux 6.7 or later, and the cpuset controller enabled down to it)", w.Who, c.dir, exclusiveFile))
			continue
		}
		s.warned.Clear(w.Dir)
		for _, a := range c.ancestors {
			ap := s.ancestors[a]
			if ap == nil {
				ap = &ancestorPlan{}
				s.ancestors[a] = ap
			}
			if ap.seen != s.passes {
				ap.seen, ap.next = s.passes, ap.next[:0]
			}
			ap.next = append(ap.next, c.ids...)
		}
		plan.Changes = append(plan.Changes, c.changes[0], c.changes[1])
	}
	for dir, c := range s.planned {
		if c.seen != s.passes {
			delete(s.planned, dir)
		}
	}
	for a, ap := range s.ancestors {
		if ap.seen != s.passes {
			delete(s.ancestors, a)
			continue
		}
		slices.Sort(ap.next)
		if ap.change.Path == "" || !slices.Equal(ap.ids, ap.next) {
			ap.ids = slices.Clone(ap.next)
			cpus := cpuset.New(ap.ids...)
			ap.change = s.exclusive(filepath.Join(s.root, a), depthOf(a), func(original string) (cpuset.CPUSet, error) {
				orig, err := cpulist.Parse(original)
				if err != nil {
					return cpuset.New(), err
				}
				return orig.Union(cpus), nil
			})
		}
		plan.Changes = append(plan.Changes, ap.change)
	}
	return plan, nil
}

// containerPlan makes the paths and changes of a container's cgroup.
func (s *Source) containerPlan(w Want) *containerPlan {
	dir := filepath.Join(s.root, w.Dir)
	c := &containerPlan{want: w, dir: dir, exclusive: filepath.Join(dir, exclusiveFile), ids: w.CPUs.UnsortedList()}
	for a := filepath.Dir(filepath.Clean(w.Dir)); a != "/" && a != "."; a = filepath.Dir(a) {
		c.ancestors = append(c.ancestors, a)
	}
	cpus, depth, who := w.CPUs, depthOf(w.Dir), w.Who
	c.changes = [2]hostfiles.Change{
		s.exclusive(dir, depth, func(string) (cpuset.CPUSet, error) { return cpus, nil }),
		{Path: filepath.Join(dir, partitionFile), Order: 2*depth + 1,
			Want:      func(string) (string, error) { return "isolated", nil },
			Satisfied: func(content, _ string) bool { return strings.HasPrefix(strings.TrimSpace(content), "isolated") },
			Verify: func(content string) error {
				if reason, bad := invalid(content); bad {
					return fmt.Errorf("container %s: the kernel made its isolated partition invalid (%s); its CPUs %s stay in the scheduler's load balancing", who, reason, cpus)
				}
				return nil
			}},
	}
	return c
}

// exclusive is the change of a cgroup's cpuset.cpus.exclusive to the set
// want computes from its original: top-down when it grows, bottom-up
// before anything grows when it gives CPUs back.
//
// Its want is kept with the original it was worked out from: a change is
// kept between passes (containerPlan, ancestorPlan) and asked for its
// want at each, from the same original nearly always (the journal's), so
// it is parsed, united and written out once, not at every pass (issue 45).
// Only the reconciler's pass asks, one pass at a time.
func (s *Source) exclusive(dir string, depth int, want func(original string) (cpuset.CPUSet, error)) hostfiles.Change {
	var last struct {
		known          bool
		original, want string
	}
	return hostfiles.Change{Path: filepath.Join(dir, exclusiveFile), Order: 2 * depth,
		Want: func(original string) (string, error) {
			if last.known && last.original == original {
				return last.want, nil
			}
			set, err := want(original)
			if err != nil {
				return "", err
			}
			last.known, last.original, last.want = true, original, set.String()
			return last.want, nil
		},
		Satisfied: func(content, want string) bool {
			if same, decided := sameList(content, want); decided {
				return same
			}
			have, err1 := cpulist.Parse(content)
			wanted, err2 := cpulist.Parse(want)
			return err1 == nil && err2 == nil && cpulist.Equal(have, wanted)
		},
		Gives: func(content, want string) bool {
			if _, decided := sameList(content, want); decided {
				return false // the same list, or nothing to give
			}
			have, err1 := cpulist.Parse(content)
			wanted, err2 := cpulist.Parse(want)
			return err1 == nil && err2 == nil && !have.IsSubsetOf(wanted)
		}}
}

// sameList tells, without parsing, whether a cgroup's list reads the want
// as written: the kernel shows cpuset.cpus.exclusive in the canonical form
// cpuset.CPUSet.String gives the want, so this is what nearly every pass
// finds, for every partition and ancestor. want always comes from Want
// (a CPUSet's String, which parses), so equal text is what parsing both
// would conclude; a pass then makes no set per file (issue 45: its
// allocations grew with the exclusive containers).
//
// It also answers, without parsing, for an empty content (what a
// cgroup's file holds before the plugin writes it, hence the original the
// journal keeps, which a settled pass compares the want with): it meets
// only an empty want, and gives nothing back. decided says that the text
// answered; same is then the answer.
func sameList(content, want string) (same, decided bool) {
	content, want = strings.TrimSpace(content), strings.TrimSpace(want)
	switch {
	case content == want:
		return true, true
	case content == "":
		return false, true
	}
	return false, false
}

// invalid tells whether a cpuset.cpus.partition reads an invalid
// partition ("isolated invalid (<reason>)"; kernels before 6.2 give no
// reason), and why.
func invalid(content string) (string, bool) {
	content = strings.TrimSpace(content)
	i := strings.Index(content, " invalid")
	if i < 0 {
		return "", false
	}
	reason := strings.TrimSpace(content[i+len(" invalid"):])
	reason = strings.TrimSuffix(strings.TrimPrefix(reason, "("), ")")
	if reason == "" {
		reason = "the kernel gives no reason"
	}
	return reason, true
}

// exists tells whether path can be stat'ed. A cgroup's exclusive file
// that exists answers for its directory too, so a pass stats one file per
// partition, not two, and into a stat buffer of its own: os.Stat's
// FileInfo is not needed (issue 45: a pass's allocations grew with the
// exclusive containers; 4 per partition, now 1, the path's bytes).
// It retries a stat interrupted by a signal (EINTR), as os.Stat does: read
// as missing, it would leave the container out of its ancestors' want for
// a pass.
func exists(path string) bool {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(path, &st)
		if err != syscall.EINTR {
			return err == nil
		}
	}
}

func depthOf(dir string) int {
	return strings.Count(strings.Trim(filepath.Clean(dir), "/"), "/") + 1
}

// Problems are the containers that asked for a partition and cannot have
// one, with why (for status).
func (s *Source) Problems() []string { return s.warned.List() }
