package kernelwork

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestNarrowed: a mask loses the held CPUs and keeps the kernel's exact
// layout (%*pb: 32-bit groups, most significant first, the first as wide
// as the CPU count needs), on odd widths and machines of more than 32
// CPUs; RPS off stays off; a mask of held CPUs only gets the runnable
// CPUs less the held ones.
func TestNarrowed(t *testing.T) {
	all := func(from, to int) []int {
		var out []int
		for c := from; c <= to; c++ {
			out = append(out, c)
		}
		return out
	}
	every := cpuset.New(all(0, 255)...)
	for _, tc := range []struct {
		name, original string
		held, runnable cpuset.CPUSet
		want           string
	}{
		{"8 CPUs", "7f", cpuset.New(2, 3), every, "73"},
		{"8 CPUs, uppercase as written by hand", "7F", cpuset.New(2, 3), every, "73"},
		{"a trailing newline", "7f\n", cpuset.New(2, 3), every, "73"},
		{"RPS off stays off", "00", cpuset.New(2, 3), every, "00"},
		{"RPS off, one digit", "0", cpuset.New(0), every, "0"},
		{"RPS off, 72 CPUs", "00,00000000,00000000", cpuset.New(3), every, "00,00000000,00000000"},
		{"held CPUs only: the runnable ones not held", "0c", cpuset.New(2, 3), cpuset.New(all(0, 6)...), "73"},
		{"6 CPUs (one odd digit group)", "3f", cpuset.New(5), every, "1f"},
		{"4 CPUs", "f", cpuset.New(0), every, "e"},
		{"9 CPUs", "1ff", cpuset.New(8), every, "0ff"},
		{"36 CPUs: a group of one digit", "f,ffffffff", cpuset.New(35), every, "7,ffffffff"},
		{"40 CPUs: a whole group held", "ff,ffffffff", cpuset.New(all(32, 39)...), every, "00,ffffffff"},
		{"72 CPUs: three groups", "ff,ffffffff,ffffffff", cpuset.New(append(all(64, 71), 0, 33)...), every, "00,fffffffd,fffffffe"},
		{"72 CPUs: held only in the top group, the rest in another", "01,00000000,00000000", cpuset.New(64), cpuset.New(append(all(0, 3), 64)...), "00,00000000,0000000f"},
		{"256 CPUs", "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff", cpuset.New(255, 128, 0),
			every, "7fffffff,ffffffff,ffffffff,fffffffe,ffffffff,ffffffff,ffffffff,fffffffe"},
		{"nothing held", "ff", cpuset.New(), every, "ff"},
		{"offline CPUs only left: the runnable ones not held", "0c", cpuset.New(2), cpuset.New(0, 1, 2, 4), "13"},
		{"isolated or offline CPUs only left", "1c", cpuset.New(2), cpuset.New(0, 2), "01"},
		{"runnable CPUs left beside offline ones: kept as they are", "1c", cpuset.New(2), cpuset.New(0, 2, 4), "18"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := narrowed("test mask", tc.original, tc.held, tc.runnable)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.True(t, meets(got, got, tc.held, tc.runnable), "%s meets itself (avoids %s)", got, tc.held)
		})
	}
	for _, tc := range []struct{ name, original string }{
		{"not hex", "fg"},
		{"empty", ""},
		{"an empty group", "ff,,ff"},
		{"a group of 9 digits", "1ffffffff"},
		{"0x prefix", "0xff"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			_, err := narrowed("the mask of eth0 rx-0", tc.original, cpuset.New(1), cpuset.New(0, 1))
			assert.ErrorContains(t, err, "the mask of eth0 rx-0: ")
		})
	}
	_, err := narrowed("the unbound workqueue mask", "0c", cpuset.New(2, 3), cpuset.New(2, 3))
	assert.EqualError(t, err, "the unbound workqueue mask: every CPU of the mask 2-3 is held, and the host keeps no CPU to give it: left as it is")
}

// TestMeets: a mask meets the want when it names no held CPU and every
// runnable CPU of the want: the kernel's dropping of isolcpus= CPUs (7
// here) meets it, a mask narrowed for an earlier, larger held set (2 was
// released, 3 is still held) does not, and neither does one that cannot
// be read. A mask with no runnable CPU and no held one (RPS off, an
// owner's mask of offline CPUs only) is left as it is.
func TestMeets(t *testing.T) {
	held := cpuset.New(3)
	runnable := cpuset.New(0, 1, 2, 3, 4, 5, 6)
	for _, tc := range []struct {
		content, want string
		meets         bool
	}{
		{"f7", "f7", true},
		{"77", "f7", true},  // isolcpus= CPU 7 dropped by the kernel
		{"f3", "f7", false}, // narrowed for held 2 and 3: 2 is not given back
		{"73", "f7", false}, // the same, 7 dropped
		{"ff", "f7", false}, // names held CPU 3
		{"04", "04", true},  // the runnable CPU left of 0c
		{"00", "f7", true},  // RPS off
		{"80", "f7", true},  // isolated CPU 7 only: no runnable CPU, no held one
		{"ff", "ff", false}, // names 3 whatever the want
		{"zz", "f7", false}, // unreadable
		{"", "f7", false},   // unreadable
		{"f7", "zz", false}, // a want that cannot be read
		{"ff,00000000", "00,00000000", true},
		{"00,00000008", "00,00000000", false},
	} {
		assert.Equal(t, tc.meets, meets(tc.content, tc.want, held, runnable), "%q for want %q", tc.content, tc.want)
	}
}

// TestMaskCutShortByTheKernel: a sysctl of Linux 6.2 up to the fix of
// dump_cpumask shows net.core.rps_default_mask in a 128-byte buffer, at
// most 14 groups (448 CPUs) and a trailing comma: on a node with more
// possible CPUs the read holds the highest CPUs only. It is not narrowed
// (the lowest CPUs are unknown), and the refusal says why, not merely
// that the mask is malformed.
func TestMaskCutShortByTheKernel(t *testing.T) {
	cut := strings.Repeat("ffffffff,", 14)
	_, err := narrowed("the default mask", cut, cpuset.New(2), cpuset.New(0, 1, 2, 3))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cut short")
	assert.Contains(t, err.Error(), "448 CPUs")
}
