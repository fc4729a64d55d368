package cpulist

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		spaced   bool // only ParseSpaced accepts it
		bad      bool
	}{
		{in: "0-3,8,10-11", want: "0-3,8,10-11"},
		{in: " 2-5\n", want: "2-5"},
		{in: "", want: ""},
		{in: "0-3, 8", want: "0-3,8", spaced: true},
		{in: "3-1", bad: true},
		{in: "a", bad: true},
		{in: "-1", bad: true},
	} {
		got, err := ParseSpaced(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got.String() != tc.want) {
			t.Errorf("ParseSpaced(%q) = %q, %v", tc.in, got, err)
		}
		got, err = Parse(tc.in)
		if bad := tc.bad || tc.spaced; bad != (err != nil) || (!bad && got.String() != tc.want) {
			t.Errorf("Parse(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"", "", true}, {"0-3", "0-3", true}, {"0,1", "1,0", true},
		{"0-3", "0-2", false}, {"0-2", "0-3", false}, {"0,2", "0,3", false}, {"", "0", false},
	} {
		a, errA := cpuset.Parse(c.a)
		b, errB := cpuset.Parse(c.b)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if got := Equal(a, b); got != c.want || got != a.Equals(b) {
			t.Errorf("Equal(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestEchoIsShort: an echo is short whatever the bytes, a printable prefix
// keeps its length, and the full value's size is told when cut.
func TestEchoIsShort(t *testing.T) {
	for _, echo := range []struct {
		f     func(string) string
		limit int
	}{{Echo, maxEcho}, {EchoLong, maxEchoLong}} {
		for _, s := range []string{"0-3", strings.Repeat("7", 400), strings.Repeat("\xb4", 400), strings.Repeat("\x00", 1000), strings.Repeat("é", 400)} {
			e := echo.f(s)
			if len(e) > 2*echo.limit+len("… (1000 bytes)") {
				t.Errorf("echo(%d bytes) is %d bytes: %s", len(s), len(e), e)
			}
			if len(s) > echo.limit && !strings.HasSuffix(e, fmt.Sprintf("(%d bytes)", len(s))) {
				t.Errorf("echo(%d bytes) = %s: does not tell the size", len(s), e)
			}
		}
		if got, want := echo.f(strings.Repeat("7", 400)), strconv.Quote(strings.Repeat("7", echo.limit))+"… (400 bytes)"; got != want {
			t.Errorf("printable prefix: got %s, want %s", got, want)
		}
		if got := echo.f("0-3"); got != `"0-3"` {
			t.Errorf("short value: got %s", got)
		}
	}
}

// TestEchoKeepsRealValues: the values tenants write in earnest are repeated
// whole. A PCI device path is 33 to 50 bytes; a cut at 32 lost its last
// character (issue 43, item 5), which is the one that tells the function.
func TestEchoKeepsRealValues(t *testing.T) {
	for _, s := range []string{"/sys/bus/pci/devices/0000:3b:00.0", "/sys/devices/pci0000:00/0000:00:1c.0/0000:3b:00.0"} {
		if got := Echo(s); got != strconv.Quote(s) {
			t.Errorf("Echo(%s) = %s, cut", s, got)
		}
	}
	list := strings.Repeat("1,", 60) + "2" // a long but real CPU list in a config file
	if got := EchoLong(list); got != strconv.Quote(list) {
		t.Errorf("EchoLong(%d bytes) = %s, cut", len(list), got)
	}
}
