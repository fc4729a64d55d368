package allocator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
)

// problemWith tells whether problems hold one at key, a warning or an
// error, whose message contains text.
func problemWith(problems config.Problems, key string, warning bool, text string) bool {
	for _, p := range problems {
		if p.Key == key && p.Warning == warning && strings.Contains(p.Message, text) {
			return true
		}
	}
	return false
}

const exclusive12 = "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"

// TestHotRemovedCPUIsAWarningForTheDaemon (review rvB, H1): after a vCPU
// is hot-removed, the config the daemon ran with still lays out for it
// (a start, a reload, validate): the listed CPU that is possible but not
// present is a warning, as an offline one is, and a count that only it
// would make fit is clamped to the CPUs present, with a warning. Both are
// the layout's NotPresent, which HotplugLayout says at the unplug.
func TestHotRemovedCPUIsAWarningForTheDaemon(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	require.Equal(t, "0-15", full.PossibleCPUs().String(), "the fixture writes cpu/possible")
	topo := unplugged(full, 15)

	l, problems := BuildLayoutRunning(topo, parseConfig(t, exclusive12))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-7,10-14", l.Exclusive.String())
	assert.Equal(t, "0-1,8-9", l.Infra.String())
	assert.True(t, problemWith(problems, "isolatedCPUs", true, "CPU 15 is not present (hot-removed, or not yet hot-added; present: 0-14, possible: 0-15)"), "%v", problems)
	assert.True(t, problemWith(problems, "pools.exclusive.count", true, "asks for 12 CPUs but only 11 are left to carve: isolated CPU 15 is not present"), "%v", problems)
	assert.Len(t, l.NotPresent, 2, "both are what the unplug changed")

	// Outside the daemon (the simulator, the DRA driver's static pools)
	// a CPU that is not present is an error, as an offline one is.
	_, problems = BuildLayout(topo, parseConfig(t, exclusive12))
	assert.True(t, problemWith(problems, "isolatedCPUs", false, "CPU 15 is not present"), "%v", problems)
	assert.True(t, problemWith(problems, "pools.exclusive.count", false, "asks for 12 CPUs but only 11 are left"), "%v", problems)

	// On the whole node nothing is said.
	l, problems = BuildLayoutRunning(full, parseConfig(t, exclusive12))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-7,10-15", l.Exclusive.String())
	assert.Empty(t, l.NotPresent)
}

// TestHotRemovedCPUKeepsTyposErrors: only what the unplugged CPUs
// explain is forgiven. A CPU outside cpu/possible is a typo, a count
// larger than the CPUs present and unplugged together is too much, and
// an unplugged CPU a list already takes is not counted twice.
func TestHotRemovedCPUKeepsTyposErrors(t *testing.T) {
	topo := unplugged(topology(t, "desktop-8c16t"), 15)
	for _, tc := range []struct{ name, config, key, text string }{
		{"outside possible", "isolatedCPUs: \"2-7,10-16\"\n", "isolatedCPUs", "CPU 16 does not exist on this node (present: 0-14, possible: 0-15); list only existing CPUs"},
		{"count beyond the unplugged", strings.Replace(exclusive12, "count: 12", "count: 13", 1), "pools.exclusive.count", "asks for 13 CPUs but only 11 are left to carve (isolatedCPUs"},
		{"unplugged CPU listed by a pool", "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {cpus: \"15\"}, shared: {count: 12}}\n", "pools.shared.count", "asks for 12 CPUs but only 11 are left to carve (isolatedCPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := BuildLayoutRunning(topo, parseConfig(t, tc.config))
			assert.True(t, problemWith(problems, tc.key, false, tc.text), "%v", problems)
		})
	}
}

// TestHotRemovedKernelIsolatedCPU: the kernel's isolated mask names the
// possible CPUs it isolates, unplugged ones too; a count carved from it
// is clamped as from isolatedCPUs, and the mask itself is not reported.
func TestHotRemovedKernelIsolatedCPU(t *testing.T) {
	topo := unplugged(topology(t, "desktop-8c16t"), 15)
	topo.Isolated, topo.IsolatedSource = cpuset.New(2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15), "sysfs"
	l, problems := BuildLayoutRunning(topo, parseConfig(t, "reservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-7,10-14", l.Exclusive.String())
	assert.True(t, problemWith(problems, "pools.exclusive.count", true, "isolated CPU 15 is not present"), "%v", problems)
	assert.False(t, problemWith(problems, "isolatedCPUs", true, "not present"), "%v", problems)
}

// TestHotplugLayoutSaysTheUnplug: a CPU hot-removed under the daemon
// leaves its pool, nothing else moves, and the problems and NotPresent
// say what a restart with the config will warn of. A CPU merely going
// offline says nothing, as before.
func TestHotplugLayoutSaysTheUnplug(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, exclusive12)
	old, problems := BuildLayoutRunning(full, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)

	l, problems := HotplugLayout(old, unplugged(full, 15), cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-7,10-14", l.Exclusive.String())
	assert.Equal(t, old.Infra.String(), l.Infra.String())
	assert.True(t, problemWith(l.NotPresent, "pools.exclusive.count", true, "isolated CPU 15 is not present"), "%v", l.NotPresent)

	off := *full
	off.Online, off.Offline = full.Online.Difference(cpuset.New(15)), cpuset.New(15)
	l, problems = HotplugLayout(old, &off, cfg)
	assert.Empty(t, problems)
	assert.Empty(t, l.NotPresent)
	assert.Equal(t, "2-7,10-14", l.Exclusive.String())
}
