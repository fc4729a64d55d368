package numamem

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// TestUntouchedReservationIsNotFreeTwice: a claim's
// reservation is pages no process has faulted in yet, so they are still in
// free_hugepages. The floor min(nr - held, free) then counts them twice
// when something outside the claims took pages: node 1 has 32 pages, claim
// A reserved 16 (untouched), an outside process took 10 (free 22). Only 6
// pages are left for claim B, yet a check of 16 passes and the offer says
// 16 are left: A and B together need 32 of the 22 pages.
func TestUntouchedReservationIsNotFreeTwice(t *testing.T) {
	m := twoNodes(32, 0, nil)
	pages := func(n int64) []NodeMemory {
		return []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: n}}}}
	}
	if _, err := m.ReserveClaim(ClaimMemory{Key: "a/cpus", Held: pages(16)}, nil, true); err != nil {
		t.Fatalf("claim A: %v", err)
	}
	// An outside process faults in 10 pages: free_hugepages 32 -> 22.
	now := map[int][]sysfs.HugePages{1: {{SizeKB: kb2M, Total: 32, Free: 22, Seq: 1}}}
	m.KeepPages(1, now[1])
	for _, o := range m.MemoryOffer() {
		if o.Node == 1 && o.HugePages[0].Count-16 > 6 {
			t.Errorf("offer of node 1: %d pages, of which claims hold 16: %d left for new claims, but only 6 are (22 free, 16 of them claim A's)", o.HugePages[0].Count, o.HugePages[0].Count-16)
		}
	}
	_, err := m.ReserveClaim(ClaimMemory{Key: "b/cpus", Held: pages(16)}, now, true)
	if err == nil {
		t.Errorf("claim B reserved 16 pages of node 1 where 22 are free and claim A's 16 untouched pages are among them: 32 promised of 22")
	}
}

// TestUntouchedClaimPagesAreNotFreeTwice: what node 1 (32 pages of 2 MiB)
// has left, for a new container (the fit), for new claims (the offer less
// the claims' reservations) and in the report, with and without a claim's
// reservation, a container using part of it, and a process outside the
// claims faulting pages in. The part of a reservation no container holds
// is still among free_hugepages: it is taken off them before the floor.
func TestUntouchedClaimPagesAreNotFreeTwice(t *testing.T) {
	cases := []struct {
		name    string
		free    int64 // free_hugepages of node 1
		claim   int64 // pages claim A reserves on node 1; 0: no claim
		holds   int64 // pages its container (bound to A when there is one) holds, all faulted in
		owner   bool  // the fit is for A's container, to which A's untouched pages are lent
		fit     int64
		offered int64 // for new claims: the offer less A's reservation
	}{
		{name: "no claim", free: 32, fit: 32, offered: 32},
		{name: "no claim, outside process took 10", free: 22, fit: 22, offered: 22},
		{name: "no claim, a container holds 10, outside process took 10", free: 12, holds: 10, fit: 12, offered: 12},
		{name: "claim untouched", free: 32, claim: 16, fit: 16, offered: 16},
		{name: "claim untouched, outside process took 10", free: 22, claim: 16, fit: 6, offered: 6},
		{name: "claim untouched, outside process took 10, fit for its container", free: 22, claim: 16, owner: true, fit: 22, offered: 6},
		{name: "claim, its container uses 10 of it", free: 22, claim: 16, holds: 10, fit: 16, offered: 16},
		{name: "claim, its container uses 10 of it, outside process took 10", free: 12, claim: 16, holds: 10, fit: 6, offered: 6},
		{name: "claim, its container uses 20, more than it", free: 12, claim: 16, holds: 20, fit: 12, offered: 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			books := owners{}
			m := twoNodes(c.free, 0, books)
			on1 := func(n int64) []NodeMemory {
				return []NodeMemory{{Node: 1, HugePages: []Pages{{SizeKB: kb2M, Count: n}}}}
			}
			if c.claim > 0 {
				_, err := m.ReserveClaim(ClaimMemory{Key: "a/cpus", Held: on1(c.claim)}, nil, false)
				require.NoError(t, err)
				m.BindClaim("a/cpus", "uid-a", "app")
			}
			if c.holds > 0 {
				books["ctr-a"] = "uid-a/app"
				m.Set("ctr-a", on1(c.holds))
			}
			var lent Lent
			if c.owner {
				lent = m.LendClaims(m.LendHeld(nil, "ctr-a"), "uid-a", "app")
			}
			f := m.Fit(new(Fit), Demand{HugePages: []Pages{{SizeKB: kb2M, Count: 1}}}, lent, nil, false)
			assert.Equal(t, c.fit, f.pagesAt(0, 1), "fit")
			for _, o := range m.MemoryOffer() {
				if o.Node == 1 {
					assert.Equal(t, c.offered, o.HugePages[0].Count-c.claim, "offer less the reservation")
				}
			}
			if !c.owner {
				for _, r := range m.Report() {
					if r.Node == 1 {
						assert.Equal(t, c.fit, r.HugePages[0].Free, "the report's free is the fit's")
					}
				}
			}
			require.NoError(t, m.Verify())
		})
	}
}
