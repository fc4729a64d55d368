// Package cpulist parses the kernel's list format ("0-3,8,10-11"), which
// sysfs files, the kernel command line, the configuration, the state file,
// the runtime's cpusets and annotations all use, so that they share one
// parser, bounded against hostile input.
package cpulist

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxCPUs bounds every CPU or NUMA node id this program accepts when it
// does not know the node yet (the kernel's NR_CPUS is at most 8192).
const MaxCPUs = 1 << 16

// maxEcho is how much of a bad value an error repeats: values come from
// tenants and other nodes, and errors reach logs and Kubernetes events.
// It fits the longest value a tenant writes in earnest, a sysfs PCI device
// path ("/sys/devices/pci0000:00/0000:00:1c.0/0000:3b:00.0"), whole.
const maxEcho = 64

// maxEchoLong is how much of a bad value from the configuration file an
// error repeats: the file is the administrator's, whose values (paths,
// lists) may be longer, but an error still must not carry a whole file.
const maxEchoLong = 256

// Echo quotes at most a short prefix of a value for an error message.
// The prefix is shortened until its quoted form fits in twice maxEcho:
// a byte that is not printable quotes to four characters. A cut value
// ends in "…" and its size.
func Echo(s string) string { return echoWithin(s, maxEcho) }

// EchoLong is Echo for the administrator's configuration file.
func EchoLong(s string) string { return echoWithin(s, maxEchoLong) }

func echoWithin(s string, limit int) string {
	n := min(len(s), limit)
	q := strconv.Quote(s[:n])
	for len(q) > 2*limit && n > 1 {
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

// Parse parses a kernel list ("0-3,8,10-11", "0-7:2/4"), tolerating
// surrounding white space and an empty list, with ids below MaxCPUs.
func Parse(s string) (cpuset.CPUSet, error) {
	return ParseBelow(s, MaxCPUs)
}

// ParseBelow parses a kernel list whose ids must all be below limit
// (the node's CPU or NUMA node count). The syntax is the kernel's
// (Documentation/admin-guide/kernel-parameters.rst, "cpu lists"): ids and
// ranges separated by commas, and a range may take a stride,
// "<first>-<last>:<used>/<group>", which splits the range into groups of
// <group> ids and keeps the first <used> of each ("0-7:2/4" is 0,1,4,5).
// It runs in time proportional to len(s) plus limit times its square root
// at worst, whatever the text: ranges and strides are never expanded id by
// id, numbers longer than the limit's are refused before conversion, and
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
	var strides []stride
	top := 0
	rest := s
	for rest != "" {
		item, tail, _ := strings.Cut(rest, ",")
		rest = tail
		if item == "" || (tail == "" && strings.HasSuffix(s, ",")) {
			return cpuset.New(), &ListError{s, "empty item"}
		}
		r, err := parseItem(item, limit)
		if err != nil {
			return cpuset.New(), &ListError{s, err.Error()}
		}
		switch {
		case r.used == 0:
			// "0-7:0/4" keeps no id of any group, as in the kernel.
			continue
		case r.used >= r.group || r.last-r.first < r.group:
			// Every id of the range, or only its first group.
			last := r.last
			if r.used < r.group {
				last = r.first + r.used - 1
			}
			spans = append(spans, span{r.first, min(last, r.last)})
		default:
			strides = append(strides, r)
		}
		top = max(top, r.last)
	}
	if len(strides) == 0 {
		if ids, ok := ascending(spans); ok {
			return cpuset.New(ids...), nil
		}
	}
	// depth[i] counts the ranges covering i, as differences (+1 at a
	// range's first id, -1 after its last): overlapping ranges cost
	// nothing extra.
	depth := make([]int32, top+2)
	for _, r := range spans {
		depth[r.first]++
		depth[r.last+1]--
	}
	addStrides(depth, strides, limit)
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

// stride is one item of a list: the ids first..last, split into groups of
// group ids of which the first used are kept. A plain id or range has
// used = group = its length.
type stride struct{ first, last, used, group int }

// parseItem parses one item: "<id>", "<id>-<id>" or
// "<id>-<id>:<used>/<group>".
func parseItem(item string, limit int) (stride, error) {
	rng, pattern, strided := strings.Cut(item, ":")
	lo, hi, isRange := strings.Cut(rng, "-")
	first, err := listID(lo, limit)
	if err != nil {
		return stride{}, err
	}
	last := first
	if isRange {
		if last, err = listID(hi, limit); err != nil {
			return stride{}, err
		}
		if last < first {
			return stride{}, fmt.Errorf("range %d-%d is reversed", first, last)
		}
	}
	r := stride{first, last, last - first + 1, last - first + 1}
	if !strided {
		return r, nil
	}
	if !isRange {
		return stride{}, fmt.Errorf("stride %s after a single id; a stride follows a range (0-7:2/4)", Echo(item))
	}
	used, group, ok := strings.Cut(pattern, "/")
	if !ok {
		return stride{}, fmt.Errorf("stride %s is not <used>/<group> (0-7:2/4)", Echo(pattern))
	}
	if r.used, err = strideSize(used); err != nil {
		return stride{}, err
	}
	if r.group, err = strideSize(group); err != nil {
		return stride{}, err
	}
	if r.group == 0 {
		return stride{}, fmt.Errorf("stride %s has groups of 0 ids", Echo(pattern))
	}
	if r.used > r.group {
		return stride{}, fmt.Errorf("stride %s uses more ids than a group has", Echo(pattern))
	}
	return r, nil
}

// maxStrideDigits bounds a stride's sizes as the kernel does (32 bits);
// sizes beyond the node only mean "one group".
const maxStrideDigits = 10

// strideSize parses a stride's used or group size: decimal digits only.
func strideSize(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s is not a number", Echo(s))
		}
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if len(s) > maxStrideDigits || err != nil {
		return 0, fmt.Errorf("stride size %s is out of range (at most %d)", Echo(s), uint32(math.MaxUint32))
	}
	return int(v), nil
}

// addStrides adds the groups of strided ranges to the difference array
// depth in time proportional to the ranges plus len(depth) times the square
// root of limit. A range of few groups adds each group as a range. The
// groups of a range of many groups (hence a small group size g) start g
// apart, so their differences (+1 at each group's first id, -1 after its
// last) form two trains of period g: those are written once, as the
// first group's differences and their cancellation after the last full
// group, into a scratch array that a running sum with step g then
// spreads to every group. One pass per distinct small g, and there are at
// most √limit of them.
func addStrides(depth []int32, strides []stride, limit int) {
	few := isqrt(limit)
	byGroup := map[int][]stride{}
	for _, r := range strides {
		full := (r.last-r.first+1)/r.group - 1 // groups before the last, all within the range
		if full <= few {
			for g := 0; g <= full; g++ {
				first := r.first + g*r.group
				depth[first]++
				depth[min(first+r.used-1, r.last)+1]--
			}
			// The last group, whole or cut short by the range's end.
			if first := r.first + (full+1)*r.group; first <= r.last {
				depth[first]++
				depth[min(first+r.used-1, r.last)+1]--
			}
			continue
		}
		byGroup[r.group] = append(byGroup[r.group], r)
	}
	if len(byGroup) == 0 {
		return
	}
	groups := make([]int, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups) // the same work in the same order each time
	train := make([]int32, len(depth))
	for _, g := range groups {
		clear(train)
		for _, r := range byGroup[g] {
			// Groups 0..n-1 lie whole within the range (used < group);
			// the rest, a last whole or partial group, is added as a range.
			n := (r.last - r.first + 1) / g
			train[r.first]++
			train[r.first+r.used]--
			if end := r.first + n*g; end < len(train) {
				train[end]--
				if end+r.used < len(train) {
					train[end+r.used]++
				}
			}
			if first := r.first + n*g; first <= r.last {
				depth[first]++
				depth[min(first+r.used-1, r.last)+1]--
			}
		}
		for i := range train {
			if i >= g {
				train[i] += train[i-g]
			}
			depth[i] += train[i]
		}
	}
}

// isqrt is the integer square root of n ≥ 0.
func isqrt(n int) int {
	r := int(math.Sqrt(float64(n)))
	for r*r > n {
		r--
	}
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}

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
// syntax; callers say what to write instead. The configuration file
// writes such lists, so the error repeats more of the value (EchoLong).
func ParseSpaced(s string) (cpuset.CPUSet, error) {
	set, err := Parse(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		return cpuset.New(), fmt.Errorf("malformed CPU list %s", EchoLong(s))
	}
	return set, nil
}

// Equal tells whether two sets hold the same CPUs. cpuset.CPUSet.Equals is
// reflect.DeepEqual over the sets' maps, a cost decisions and Synchronize's
// check of every container should not pay.
func Equal(a, b cpuset.CPUSet) bool { return a.Size() == b.Size() && a.IsSubsetOf(b) }
