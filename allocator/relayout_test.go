package allocator

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

const relayoutPools = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`

// withOffline is topo with cpus offline, as the kernel shows it after
// echo 0 > cpuN/online.
func withOffline(topo *sysfs.Topology, cpus ...int) *sysfs.Topology {
	t := *topo
	t.CPUs = slices.Clone(topo.CPUs)
	off := cpuset.New(cpus...)
	for i := range t.CPUs {
		if off.Contains(t.CPUs[i].ID) {
			t.CPUs[i].Online = false
		}
	}
	t.Online, t.Offline = topo.Online.Difference(off), topo.Offline.Union(off)
	return &t
}

func layoutOf(t *testing.T, topo *sysfs.Topology, yaml string) *Layout {
	t.Helper()
	l, problems := BuildLayoutRunning(topo, parseConfig(t, yaml))
	require.False(t, problems.HasErrors(), "%v", problems)
	return l
}

func shared(id string) Request {
	return Request{ID: id, Pod: PodRef{Namespace: "ns", Name: "pod-" + id, UID: "uid-" + id}, Container: "c", Pool: pools.Shared,
		NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()}
}

// TestRelayout: a layout that leaves every exclusive container and hold on
// its CPUs is taken, the shared members following; one that takes an
// exclusive container's CPUs, or a hold's, names them; the receiver is
// never changed.
func TestRelayout(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", relayoutPools)
	x, err := a.Allocate(exclusive("x", 2))
	require.NoError(t, err)
	require.Equal(t, "4,12", x.Assignment.CPUs.String())
	_, err = a.Allocate(shared("s"))
	require.NoError(t, err)
	topo := a.Topology()

	next, blockers := a.Relayout(layoutOf(t, topo, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {cpus: "4-6,12-14"}, shared: {cpus: "2-3,7,10-11,15"}}}`))
	require.Empty(t, blockers)
	s, _ := next.Get("s")
	assert.Equal(t, "2-3,7,10-11,15", s.CPUs.String())
	xa, _ := next.Get("x")
	assert.Equal(t, "4,12", xa.CPUs.String())
	old, _ := a.Get("s")
	assert.Equal(t, "2-3,10-11", old.CPUs.String(), "the receiver is not changed")
	_, err = next.Allocate(exclusive("y", 6))
	require.Error(t, err, "5-6,13-14 are 4 CPUs")

	shifted := layoutOf(t, topo, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {cpus: "5-7,13-15"}, shared: {cpus: "2-4,10-12"}}}`)
	_, blockers = a.Relayout(shifted)
	require.Len(t, blockers, 1)
	assert.Equal(t, "ns/pod-x/c", blockers[0].Who)
	assert.Equal(t, "4,12", blockers[0].CPUs.String())
	assert.False(t, blockers[0].Held)

	a.Stop("x", nil)
	_, blockers = a.Relayout(shifted)
	require.Len(t, blockers, 1, "the hold")
	assert.True(t, blockers[0].Held)

	_, blockers = a.Relayout(layoutOf(t, topo, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {cpus: "2-7,10-15"}}}`))
	require.Len(t, blockers, 1, "the shared member's pool is gone: it would have to move")
	assert.Equal(t, "ns/pod-s/c", blockers[0].Who)
}

// TestHotplugKeepsOfflineHeldCPUs: a held CPU that goes offline stays its
// container's (never handed out, offline or back online, while it lives);
// a free one leaves its pool and comes back to it.
func TestHotplugKeepsOfflineHeldCPUs(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", relayoutPools)
	cfg := parseConfig(t, relayoutPools)
	_, err := a.Allocate(exclusive("x", 2)) // 4,12
	require.NoError(t, err)
	full := a.Topology()

	off := withOffline(full, 12, 7)
	l, problems := HotplugLayout(a.Layout(), off, cfg)
	require.Empty(t, problems)
	assert.Equal(t, "4-6,13-15", l.Exclusive.String())
	b, moved := a.Rebase(off, l)
	assert.Empty(t, moved)
	assert.Equal(t, map[string]cpuset.CPUSet{"x": cpuset.New(12)}, b.OfflineHeld())
	xa, _ := b.Get("x")
	assert.Equal(t, "4,12", xa.CPUs.String(), "the record keeps it")
	y, err := b.Allocate(exclusive("y", 4))
	require.NoError(t, err)
	assert.Equal(t, "5-6,13-14", y.Assignment.CPUs.String())
	z, err := b.Allocate(exclusive("z", 1))
	require.NoError(t, err)
	assert.Equal(t, "15", z.Assignment.CPUs.String())
	_, err = b.Allocate(exclusive("w", 1))
	require.Error(t, err, "12 is offline and x's")
	b.Release("z")

	l2, _ := HotplugLayout(l, full, cfg)
	assert.Equal(t, "4-7,12-15", l2.Exclusive.String(), "both back in exclusive")
	c, _ := b.Rebase(full, l2)
	assert.Empty(t, c.OfflineHeld())
	assert.Equal(t, "7,15", c.FreeCPUs(pools.Exclusive).String(), "12 is still x's")

	// Offline, its owner gone: free, but in no pool until it is back.
	d, _ := c.Rebase(off, l)
	d.Release("x")
	assert.Equal(t, "4,15", d.FreeCPUs(pools.Exclusive).String())
	e, _ := d.Rebase(full, l2)
	assert.Equal(t, "4,7,12,15", e.FreeCPUs(pools.Exclusive).String())
}

// TestHotplugLayoutNewCPUs: a CPU that comes online joins the pool the
// config gives it, also while another CPU of a counted pool is still
// offline (counts are carved on the present CPUs); infra, when the config
// cannot be laid out on the node as it is (TestHotplugLayoutKeepsReserved).
func TestHotplugLayoutNewCPUs(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	counted := `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {count: 12}}}`
	cfg := parseConfig(t, counted)
	start, problems := BuildLayout(full, cfg)
	require.False(t, problems.HasErrors())
	require.Equal(t, "2-7,10-15", start.Exclusive.String())

	both := withOffline(full, 7, 15)
	l, _ := HotplugLayout(start, both, cfg)
	assert.Equal(t, "2-6,10-14", l.Exclusive.String())

	one := withOffline(full, 15)
	l2, problems := HotplugLayout(l, one, cfg)
	assert.False(t, problems.HasErrors(), "12 CPUs are carved from the 12 present: %v", problems)
	assert.Equal(t, "2-7,10-14", l2.Exclusive.String())
	assert.Equal(t, "0-1,8-9", l2.Infra.String(), "7 joins exclusive, not infra")

	l3, problems := HotplugLayout(l, full, cfg)
	assert.False(t, problems.HasErrors())
	assert.Equal(t, "2-7,10-15", l3.Exclusive.String(), "both back where the config puts them")
	assert.Equal(t, "0-1,8-9", l3.Infra.String())
}

// unplugged is topo without cpus at all: a hypervisor took the vCPUs away
// (they are not even present).
func unplugged(topo *sysfs.Topology, cpus ...int) *sysfs.Topology {
	t := *topo
	gone := cpuset.New(cpus...)
	t.CPUs = slices.DeleteFunc(slices.Clone(topo.CPUs), func(c sysfs.CPU) bool { return gone.Contains(c.ID) })
	t.Present, t.Online, t.Offline = topo.Present.Difference(gone), topo.Online.Difference(gone), topo.Offline.Difference(gone)
	return &t
}

// TestHotplugLayoutKeepsReserved (issue 41, item 5): a reserved CPU that
// comes online is reserved again, and never lent to
// exclusive-non-isolcpus, also when the config cannot be laid out on the
// node as it is now and the CPUs that came online join infra; nor is an
// isolated one (review 59: isolated CPU 7 was lent then).
func TestHotplugLayoutKeepsReserved(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {count: 12}, exclusive-non-isolcpus: {enabled: true}}}`)
	start, problems := BuildLayout(full, cfg)
	require.False(t, problems.HasErrors())

	down, _ := HotplugLayout(start, withOffline(full, 7, 8, 15), cfg)
	require.Equal(t, "0", down.Reserved.String())

	// 7 and 8 come back; 15 comes back too (a count that fits): the pools
	// as the config gives them.
	back, problems := HotplugLayout(down, full, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "0,8", back.Reserved.String())
	assert.Equal(t, "1,9", back.ExclusiveNonIsolcpus.String())

	// 15 was unplugged for good: 12 CPUs no longer fit the present ones,
	// so 7 and 8 join infra, and 8 is reserved there.
	fallback, problems := HotplugLayout(down, unplugged(full, 15), cfg)
	require.True(t, problems.HasErrors(), "12 CPUs cannot be carved from 11")
	assert.Equal(t, "2-6,10-14", fallback.Exclusive.String())
	assert.Equal(t, "0-1,7-9", fallback.Infra.String())
	assert.Equal(t, "0,8", fallback.Reserved.String())
	assert.Equal(t, "1,9", fallback.ExclusiveNonIsolcpus.String(), "8 is reserved and 7 isolated: neither is lent")
	assert.True(t, fallback.Isolated.Contains(7))

	// After a restart while 7 and 15 were offline, 7 coming back while 15
	// is still offline joins exclusive: the count fits the present CPUs.
	l, problems := BuildLayoutRunning(withOffline(full, 7, 15), cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	one, problems := HotplugLayout(l, withOffline(full, 15), cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-7,10-14", one.Exclusive.String())
}

// TestHotplugLayoutDefaultPoolLendsAgain (review 58): with defaultPool
// exclusive-non-isolcpus, infra CPUs offline for a while leave it nothing
// to lend; that is a warning, not an error, so that a CPU that comes back
// online joins the pool the config gives it (an error made the hotplug
// fall back, and isolated CPU 5 joined infra and was lent).
func TestHotplugLayoutDefaultPoolLendsAgain(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, `{isolatedCPUs: "2-15", pools: {exclusive-non-isolcpus: {enabled: true}}, defaultPool: exclusive-non-isolcpus}`)
	start, problems := BuildLayout(full, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	require.Equal(t, "2-15", start.Exclusive.String())

	down, _ := HotplugLayout(start, withOffline(full, 1, 5), cfg)
	back, problems := HotplugLayout(down, withOffline(full, 1), cfg)
	assert.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "2-15", back.Exclusive.String(), "5 is isolated: back in exclusive")
	assert.Equal(t, "0", back.Infra.String())
	assert.False(t, back.ExclusiveNonIsolcpus.Contains(5), "an isolated CPU is never lent")
}

// TestDefaultPoolReservedOfflineNeverLends (review 58): a reserved CPU
// that is offline is still reserved; its coming back lends nothing, so a
// defaultPool exclusive-non-isolcpus that has nothing else to lend is an
// error, offline or not.
func TestDefaultPoolReservedOfflineNeverLends(t *testing.T) {
	cfg := parseConfig(t, `{isolatedCPUs: "2-15", reservedCPUs: "0-1", pools: {exclusive-non-isolcpus: {enabled: true}}, defaultPool: exclusive-non-isolcpus}`)
	for _, topo := range []*sysfs.Topology{topology(t, "desktop-8c16t"), withOffline(topology(t, "desktop-8c16t"), 1)} {
		_, problems := BuildLayoutRunning(topo, cfg)
		assert.True(t, problems.HasErrors(), "offline %s: %v", topo.Offline, problems)
	}
}

// TestDefaultPoolIsolatedNeverLends (review 59): infra's isolated CPUs (a
// count smaller than the isolated set) are not lent, so a defaultPool
// exclusive-non-isolcpus whose infra has nothing else to lend is an
// error, and the pool alone is a warning that says why it lends nothing.
func TestDefaultPoolIsolatedNeverLends(t *testing.T) {
	topo := topology(t, "desktop-8c16t")
	eni := `isolatedCPUs: "2-15", reservedCPUs: "0-1", pools: {exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}`
	l, problems := BuildLayoutRunning(topo, parseConfig(t, "{"+eni+"}"))
	require.False(t, problems.HasErrors(), "%v", problems)
	assert.Equal(t, "6-9,14-15", l.Infra.Difference(l.Reserved).String(), "isolated CPUs left to infra")
	assert.True(t, l.ExclusiveNonIsolcpus.IsEmpty(), "lends %s", l.ExclusiveNonIsolcpus)
	assert.Contains(t, problems.Error(), "every CPU of infra (0-1,6-9,14-15) is reserved or isolated")
	assert.Contains(t, problems.Error(), "where the kernel does not balance load across isolated CPUs; exclusive-non-isolcpus never lends them")

	_, problems = BuildLayoutRunning(topo, parseConfig(t, "{"+eni+", defaultPool: exclusive-non-isolcpus}"))
	require.True(t, problems.HasErrors(), "%v", problems)
	assert.Contains(t, problems.Error(), "has no CPU to lend on this node (infra 0-1,6-9,14-15, reserved 0-1, isolated 6-9,14-15")
}

// TestHotplugSharedPoolOfflineRunsOnInfra: while every CPU of the shared
// pool is offline, its members and the shared part of exclusive
// containers that asked for it run on infra, never only on offline CPUs
// (the kernel would run them on their parent's CPUs, exclusive ones
// included); they follow infra while there (a CPU lent to
// exclusive-non-isolcpus leaves them), and move back when the pool's CPUs
// come online.
func TestHotplugSharedPoolOfflineRunsOnInfra(t *testing.T) {
	yaml := `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {cpus: "4-7,12-15"}, shared: {cpus: "2-3,10-11"}, exclusive-non-isolcpus: {enabled: true}}}`
	a := newAllocator(t, "desktop-8c16t", yaml)
	_, err := a.Allocate(shared("s"))
	require.NoError(t, err)
	x := exclusive("x", 1)
	x.WithShared = true
	_, err = a.Allocate(x)
	require.NoError(t, err)
	full := a.Topology()
	require.Equal(t, "0-1,8-9", a.PoolCPUs(pools.Infra).String())

	off := withOffline(full, 2, 3, 10, 11)
	b, moved := a.Rebase(off, mustHotplug(t, a, off, yaml))
	require.True(t, b.PoolCPUs(pools.Shared).IsEmpty())
	assert.Len(t, moved, 2)
	s, _ := b.Get("s")
	assert.Equal(t, "0-1,8-9", s.CPUs.String(), "the shared member runs on infra")
	xa, _ := b.Get("x")
	assert.Equal(t, "0-1,8-9", xa.Shared.String(), "so does x's shared part")

	y := exclusive("y", 1)
	y.Pool = pools.ExclusiveNonIsolcpus
	res, err := b.Allocate(y)
	require.NoError(t, err)
	lent := res.Assignment.CPUs
	require.Equal(t, 1, lent.Size())
	s, _ = b.Get("s")
	xa, _ = b.Get("x")
	assert.False(t, s.CPUs.Contains(lent.List()[0]), "infra lent %s to y: s leaves it (%s)", lent, s.CPUs)
	assert.False(t, xa.Shared.Contains(lent.List()[0]), "and x's shared part too (%s)", xa.Shared)
	ids := []string{}
	for _, u := range res.Updates {
		ids = append(ids, u.ID)
	}
	assert.Subset(t, ids, []string{"s", "x"}, "both are updated")

	c, moved := b.Rebase(full, mustHotplug(t, b, full, yaml))
	assert.Len(t, moved, 2)
	s, _ = c.Get("s")
	assert.Equal(t, "2-3,10-11", s.CPUs.String(), "back on its pool")
	xa, _ = c.Get("x")
	assert.Equal(t, "2-3,10-11", xa.Shared.String())
}
