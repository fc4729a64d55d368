package allocator

// The memory DRA claims reserve (docs/dra.md, "Memory and hugepages") is
// counted in the same account as the containers' (numamem, claims.go):
// the allocator passes the driver's calls on, and answers the account's
// one question of it, which container a holder is.

import (
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// ReserveClaim reserves a claim request's memory (numamem's
// Account.ReserveClaim).
func (a *Allocator) ReserveClaim(c numamem.ClaimMemory, now map[int][]sysfs.HugePages, check bool) (warning string, err error) {
	return a.mem.ReserveClaim(c, now, check)
}

// ReleaseClaims gives back the reservations of these keys (a claim was
// unprepared); unknown keys are fine.
func (a *Allocator) ReleaseClaims(keys []string) { a.mem.ReleaseClaims(keys) }

// BindClaim tells that a container showed the request's token: its
// memory comes from the reservation first.
func (a *Allocator) BindClaim(key, podUID, container string) { a.mem.BindClaim(key, podUID, container) }

// ClaimReservations returns the reservations, by key.
func (a *Allocator) ClaimReservations() map[string]numamem.ClaimMemory {
	return a.mem.ClaimReservations()
}

// MemoryOffer is, for every NUMA node with memory in id order, what the
// DRA driver offers (numamem's Account.MemoryOffer).
func (a *Allocator) MemoryOffer() []numamem.NodeOffer { return a.mem.MemoryOffer() }

// claimOwners tells the account which container a holder is: a running
// container, or a hold by its stopped container's id.
type claimOwners struct{ a *Allocator }

func (o claimOwners) OwnerOf(id string) (podUID, container string, ok bool) {
	as := o.a.containers[id]
	if as == nil {
		as = o.a.holdOf(id)
	}
	if as == nil {
		return "", "", false
	}
	return as.Pod.UID, as.Container, true
}

func (o claimOwners) HoldersOf(podUID, container string) []string {
	var ids []string
	for id := range o.a.byPod[podUID] {
		if as := o.a.containers[id]; as != nil && as.Container == container {
			ids = append(ids, id)
		}
	}
	if h := o.a.holds[podUID+"/"+container]; h != nil {
		ids = append(ids, h.ID)
	}
	return ids
}

// holdOf finds a hold by its stopped container's id (a hold restored at a
// restart is counted before anything bound it).
func (a *Allocator) holdOf(id string) *Assignment {
	for _, h := range a.holds {
		if h.ID == id {
			return &h.Assignment
		}
	}
	return nil
}
