// Package cpulist parses the kernel's list format ("0-3,8,10-11"), which
// sysfs files, the kernel command line, the configuration, the state file,
// the runtime's cpusets and annotations all use, so that they share one
// parser, bounded against hostile input.
package cpulist

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxCPUs bounds every CPU or NUMA node id this program accepts when it
// does not know the node yet (the kernel's NR_CPUS is at most 8192).
const MaxCPUs = 1 << 16

// maxEcho is how much of a bad value an error repeats: values come from
// tenants and other nodes, and errors reach logs and Kubernetes events.
const maxEcho = 32

// Echo quotes at most a short prefix of a value for an error message.
// The prefix is shortened until its quoted form fits in twice maxEcho:
// a byte that is not printable quotes to four characters.
func Echo(s string) string {
	n := min(len(s), maxEcho)
	q := strconv.Quote(s[:n])
	for len(q) > 2*maxEcho && n > 1 {
		n /= 2
		q = strconv.Quote(s[:n])
	}
	if n == len(s) {
		return q
	}
	return q + fmt.Sprintf("… (%d bytes)", len(s))
}

// ListError is a malformed or out-of-range list.
type ListError struct {
	Value  string
	Reason string
}

func (e *ListError) Error() string {
	return fmt.Sprintf("malformed CPU list %s: %s", Echo(e.Value), e.Reason)
}

// Parse parses a kernel list ("0-3,8,10-11"), tolerating surrounding
// white space and an empty list, with ids below MaxCPUs.
func Parse(s string) (cpuset.CPUSet, error) {
	return ParseBelow(s, MaxCPUs)
}

// ParseBelow parses a kernel list whose ids must all be below limit
// (the node's CPU or NUMA node count). It runs in time proportional to
// len(s) plus limit, whatever the text: ranges are never expanded one by
// one, numbers longer than the limit's are refused before conversion, and
// only the kernel's syntax is accepted (no signs, no spaces inside).
func ParseBelow(s string, limit int) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New(), nil
	}
	if limit <= 0 {
		return cpuset.New(), &ListError{s, "no ids are valid here"}
	}
	limit = min(limit, MaxCPUs)
	var spans []span
	top := 0
	rest := s
	for rest != "" {
		item, tail, _ := strings.Cut(rest, ",")
		rest = tail
		if item == "" || (tail == "" && strings.HasSuffix(s, ",")) {
			return cpuset.New(), &ListError{s, "empty item"}
		}
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := listID(lo, limit)
		if err != nil {
			return cpuset.New(), &ListError{s, err.Error()}
		}
		last := first
		if isRange {
			if last, err = listID(hi, limit); err != nil {
				return cpuset.New(), &ListError{s, err.Error()}
			}
			if last < first {
				return cpuset.New(), &ListError{s, fmt.Sprintf("range %d-%d is reversed", first, last)}
			}
		}
		spans = append(spans, span{first, last})
		top = max(top, last)
	}
	if ids, ok := ascending(spans); ok {
		return cpuset.New(ids...), nil
	}
	// depth[i] counts the ranges covering i, as differences (+1 at a
	// range's first id, -1 after its last): overlapping ranges cost
	// nothing extra.
	depth := make([]int32, top+2)
	for _, r := range spans {
		depth[r.first]++
		depth[r.last+1]--
	}
	var ids []int
	cover := int32(0)
	for i := 0; i <= top; i++ {
		if cover += depth[i]; cover > 0 {
			ids = append(ids, i)
		}
	}
	return cpuset.New(ids...), nil
}

type span struct{ first, last int }

// ascending lists the ids of spans that are in order and do not overlap,
// as the kernel and cpuset.String write them: the common case, in time
// proportional to the ids rather than to the largest. ok is false for any
// other order, which the caller resolves.
func ascending(spans []span) ([]int, bool) {
	n := 0
	for i, r := range spans {
		if i > 0 && r.first <= spans[i-1].last {
			return nil, false
		}
		n += r.last - r.first + 1
	}
	ids := make([]int, 0, n)
	for _, r := range spans {
		for id := r.first; id <= r.last; id++ {
			ids = append(ids, id)
		}
	}
	return ids, true
}

// listID parses one id: decimal digits only, below limit.
func listID(s string, limit int) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s is not a number", Echo(s))
		}
	}
	if len(s) > len(strconv.Itoa(limit)) {
		return 0, fmt.Errorf("id %s is out of range (this node has ids 0-%d)", Echo(s), limit-1)
	}
	v, _ := strconv.Atoi(s)
	if v >= limit {
		return 0, fmt.Errorf("id %d is out of range (this node has ids 0-%d)", v, limit-1)
	}
	return v, nil
}

// ParseSpaced parses a list as people write it ("0-3, 8"): the kernel's
// syntax with spaces anywhere. The error does not explain the kernel
// syntax; callers say what to write instead.
func ParseSpaced(s string) (cpuset.CPUSet, error) {
	set, err := Parse(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		return cpuset.New(), fmt.Errorf("malformed CPU list %s", Echo(s))
	}
	return set, nil
}

// Equal tells whether two sets hold the same CPUs. cpuset.CPUSet.Equals is
// reflect.DeepEqual over the sets' maps, a cost decisions and Synchronize's
// check of every container should not pay.
func Equal(a, b cpuset.CPUSet) bool { return a.Size() == b.Size() && a.IsSubsetOf(b) }
