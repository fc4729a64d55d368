package numamem

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
)

const (
	kb2M = 2048
	kb1G = 1048576
	gib  = int64(1) << 30
)

// twoNodes is an account of two nodes of 8 GiB, node 1 with 32 pages of
// 2 MiB (free as given), the host keeping reserve bytes of each.
func twoNodes(free1 int64, reserve int64, owners Owners) *Account {
	topo := &sysfs.Topology{NUMANodes: []sysfs.NUMANode{
		{ID: 0, HasMemory: true, MemTotalKB: 8 << 20, HugePages: []sysfs.HugePages{{SizeKB: kb2M}}},
		{ID: 1, HasMemory: true, MemTotalKB: 8 << 20, HugePages: []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: free1}}},
	}}
	m := New(topo, []int{0, 1}, reserve, map[int64]int64{}, owners)
	return &m
}

// TestFitSplitAndShortage: the fit's answers for each set and order of
// nodes, by the rule of docs/placement.md.
func TestFitSplitAndShortage(t *testing.T) {
	cases := []struct {
		name    string
		free1   int64 // free_hugepages of node 1
		held    []NodeMemory
		lent    string // a holder whose holdings are lent
		demand  Demand
		running bool
		nodes   []int
		fits    bool
		split   []NodeMemory
		short   string
		huge    bool
	}{
		{name: "pages on node 1 only", free1: 32, demand: Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 16}}},
			nodes: []int{0, 1}, fits: true, split: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 16}}}}},
		{name: "node 0 alone has none", free1: 32, demand: Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 16}}},
			nodes: []int{0}, split: []NodeMemory{}, short: "hugepages-2Mi: asked 16, free node0 0", huge: true},
		{name: "free_hugepages is a floor", free1: 4, demand: Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 8}}},
			nodes: []int{1}, split: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 4}}}}, short: "hugepages-2Mi: asked 8, free node1 4", huge: true},
		{name: "but not for a running container", free1: 0, running: true, demand: Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 8}}},
			nodes: []int{1}, fits: true, split: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 8}}}}},
		{name: "held pages are not free", free1: 32, held: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 30}}}},
			demand: Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 4}}}, nodes: []int{1},
			split: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 2}}}}, short: "hugepages-2Mi: asked 4, free node1 2", huge: true},
		{name: "unless lent", free1: 32, held: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 30}}}}, lent: "h",
			demand: Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 4}}}, nodes: []int{1}, fits: true,
			split: []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: 4}}}}},
		{name: "memory spills to the next node", free1: 32, demand: Demand{Memory: 10 * gib}, nodes: []int{1, 0}, fits: true,
			// node 1: 8 GiB less its 64 MiB of pages less 1 GiB reserve.
			split: []NodeMemory{{Node: 0, Memory: 10*gib - (7*gib - 64<<20)}, {Node: 1, Memory: 7*gib - 64<<20}}},
		{name: "an over-committed limit lands on the last node", free1: 32, demand: Demand{Memory: 20 * gib}, nodes: []int{0, 1},
			split: []NodeMemory{{Node: 0, Memory: 7 * gib}, {Node: 1, Memory: 13 * gib}}, short: "memory: asked 20Gi, free node0 7Gi node1 7104Mi"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := twoNodes(c.free1, gib, nil)
			if c.held != nil {
				m.Set("h", c.held)
			}
			var lent Lent
			if c.lent != "" {
				lent = m.LendHeld(nil, c.lent)
			}
			f := m.Fit(new(Fit), c.demand, lent, nil, c.running)
			assert.Equal(t, c.fits, f.Fits(c.nodes))
			assert.Equal(t, c.split, f.Split(c.nodes))
			short, huge := f.Shortage(c.nodes)
			assert.Equal(t, c.short, short)
			assert.Equal(t, c.huge, huge)
			require.NoError(t, m.Verify())
		})
	}
}

// TestRefusalSetsTheMemoryLimitAside: hugepages short refuse; a memory
// limit short is set aside with a warning, and the fit then holds it.
func TestRefusalSetsTheMemoryLimitAside(t *testing.T) {
	m := twoNodes(32, 0, nil)
	f := m.Fit(new(Fit), Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 64}}}, nil, nil, false)
	err, refused := f.Refusal("exclusive", "container ns/p/c", []int{0, 1})
	require.True(t, refused)
	assert.ErrorContains(t, err, "pool exclusive cannot fit container ns/p/c: hugepages-2Mi: asked 64, free node0 0 node1 32; reserve hugepages")

	f = m.Fit(new(Fit), Demand{Memory: 64 * gib}, nil, nil, false)
	err, refused = f.Refusal("exclusive", "container ns/p/c", []int{0, 1})
	require.False(t, refused)
	require.NoError(t, err)
	assert.True(t, f.MemoryIgnored())
	assert.Contains(t, f.Warning(), "memory: asked 64Gi")
	assert.True(t, f.Fits([]int{0}), "set aside, any node holds it")
}

// TestKeepPagesKeepsTheNewerReading: a reading may hold only some sizes; the others
// keep the counts last read, and each size keeps the newer of two
// readings.
func TestKeepPagesKeepsTheNewerReading(t *testing.T) {
	topo := &sysfs.Topology{NUMANodes: []sysfs.NUMANode{{ID: 0, HasMemory: true, HugePages: []sysfs.HugePages{{SizeKB: kb2M}, {SizeKB: kb1G}}}}}
	m := New(topo, []int{0}, 0, nil, nil)
	m.KeepPages(0, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 8, Seq: 5}})
	m.KeepPages(0, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 32, Seq: 4}, {SizeKB: kb1G, Total: 2, Free: 2, Seq: 4}})
	assert.Equal(t, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 8, Seq: 5}, {SizeKB: kb1G, Total: 2, Free: 2, Seq: 4}}, m.PagesOf(0))
	assert.Equal(t, []sysfs.HugePages{{SizeKB: kb2M}, {SizeKB: kb1G}}, topo.NUMANodes[0].HugePages, "discovery's counts are not written through")
	m.KeepPages(7, []sysfs.HugePages{{SizeKB: kb2M, Total: 1}})
	assert.Nil(t, m.PagesOf(7), "a node the topology lacks is not kept")
}

// owners is a caller's books: holder id → "<pod uid>/<name>".
type owners map[string]string

func (o owners) OwnerOf(id string) (string, string, bool) {
	k, ok := o[id]
	if !ok {
		return "", "", false
	}
	uid, name, _ := strings.Cut(k, "/")
	return uid, name, true
}

func (o owners) HoldersOf(uid, name string) []string {
	var ids []string
	for id, k := range o {
		if k == uid+"/"+name {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestAccountProperty: over random holdings set and given back, claims
// reserved, bound and released, no node's count goes negative, and each
// node's count is the sum of what the holders hold (Verify); a claim's
// container is never counted twice with its reservation.
func TestAccountProperty(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewSource(seed))
		books := owners{}
		m := twoNodes(32, 0, books)
		holding := func() []NodeMemory {
			var out []NodeMemory
			for n := range 2 {
				if rng.Intn(2) == 0 {
					nm := NodeMemory{Node: n, Memory: int64(rng.Intn(4)) * gib}
					if c := int64(rng.Intn(8)); c > 0 {
						nm.HugePages = []Pages{{SizeKB: kb2M, Count: c}}
					}
					out = append(out, nm)
				}
			}
			return out
		}
		for step := range 200 {
			id := fmt.Sprint("c", rng.Intn(6))
			switch op := rng.Intn(6); op {
			case 0, 1:
				books[id] = fmt.Sprintf("uid%d/c", rng.Intn(3))
				m.Set(id, holding())
			case 2:
				m.Set(id, nil)
				delete(books, id)
			case 3:
				_, _ = m.ReserveClaim(ClaimMemory{Key: fmt.Sprint("claim", rng.Intn(3), "/r"), Held: holding()}, nil, false)
			case 4:
				m.BindClaim(fmt.Sprint("claim", rng.Intn(3), "/r"), fmt.Sprint("uid", rng.Intn(3)), "c")
			default:
				m.ReleaseClaims([]string{fmt.Sprint("claim", rng.Intn(3), "/r")})
			}
			require.NoError(t, m.Verify(), "seed %d step %d", seed, step)
			for key, c := range m.ClaimReservations() {
				if c.PodUID == "" {
					continue
				}
				// The reservation and its container's holders together
				// count no less than the reservation, and the
				// reservation's holder no more.
				got := DemandOf(m.Held(claimHolder + key))
				assert.LessOrEqual(t, got.Memory, DemandOf(c.Held).Memory, "seed %d step %d", seed, step)
			}
		}
		for id := range books {
			m.Set(id, nil)
		}
		for key := range m.ClaimReservations() {
			m.ReleaseClaims([]string{key})
		}
		require.Empty(t, m.Use(), "seed %d: all given back", seed)
		require.NoError(t, m.Verify())
	}
}
