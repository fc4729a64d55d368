package dra

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// The names of package dracore, the driver's part without Kubernetes
// libraries (which the NRI plugin, `status` and `validate` use), under
// their names here too: the driver's API is one, whichever binary links
// it (issue 33).

// DriverName is dracore.DriverName.
const DriverName = dracore.DriverName

// EnvPrefix is dracore.EnvPrefix.
const EnvPrefix = dracore.EnvPrefix

// The attributes, capacities and models of dracore.
const (
	AttrNUMANode   = dracore.AttrNUMANode
	AttrPool       = dracore.AttrPool
	AttrSocket     = dracore.AttrSocket
	AttrModel      = dracore.AttrModel
	CapacityCPUs   = dracore.CapacityCPUs
	CapacityMemory = dracore.CapacityMemory
	ModelNUMANode  = dracore.ModelNUMANode
	ModelCPU       = dracore.ModelCPU
	// MaxResultsPerClaim is dracore.MaxResultsPerClaim, the API's
	// resourceapi.AllocationResultsMaxSize.
	MaxResultsPerClaim = dracore.MaxResultsPerClaim
)

// The driver's states (dracore.State).
const (
	StateStarting              = dracore.StateStarting
	StateWaitingForCredentials = dracore.StateWaitingForCredentials
	StateWaitingForKubelet     = dracore.StateWaitingForKubelet
	StateRetrying              = dracore.StateRetrying
	StateServing               = dracore.StateServing
	StateRegistered            = dracore.StateRegistered
	StateStopped               = dracore.StateStopped
)

type (
	// Pools is dracore.Pools: what the driver needs from the daemon.
	Pools = dracore.Pools
	// Static is dracore.Static.
	Static = dracore.Static
	// Container is dracore.Container.
	Container = dracore.Container
	// Grant is dracore.Grant.
	Grant = dracore.Grant
	// Pending is dracore.Pending.
	Pending = dracore.Pending
	// Group is dracore.Group.
	Group = dracore.Group
	// State is dracore.State.
	State = dracore.State
	// Status is dracore.Status.
	Status = dracore.Status
)

// NewStatic is dracore.NewStatic.
func NewStatic(topo *sysfs.Topology, cfg *config.Config) (*Static, error) {
	return dracore.NewStatic(topo, cfg)
}

// PlaceOn is dracore.PlaceOn.
func PlaceOn(alloc *allocator.Allocator, opts config.Allocation, pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	return dracore.PlaceOn(alloc, opts, pool, numa, n, exclude)
}

// Tokens is dracore.Tokens.
func Tokens(env []string) ([]string, error) { return dracore.Tokens(env) }

// ClaimLimit is dracore.ClaimLimit.
func ClaimLimit(model string, groups []Group) string { return dracore.ClaimLimit(model, groups) }

// Offer is dracore.Offer.
func Offer(topo *sysfs.Topology, layout *allocator.Layout, heldOutside map[string]cpuset.CPUSet) []Group {
	return dracore.Offer(topo, layout, heldOutside)
}

// WithMemory is dracore.WithMemory.
func WithMemory(groups []Group, offer []numamem.NodeOffer) []Group {
	return dracore.WithMemory(groups, offer)
}

// WithMemoryHeld is dracore.WithMemoryHeld.
func WithMemoryHeld(groups []Group, offer []numamem.NodeOffer, heldBy map[int]string) []Group {
	return dracore.WithMemoryHeld(groups, offer, heldBy)
}

// Models is dracore.Models.
func Models() []string { return dracore.Models() }

// GroupName is dracore.GroupName.
func GroupName(pool string, numa int) string { return dracore.GroupName(pool, numa) }

// SlotName is dracore.SlotName.
func SlotName(pool string, numa, i int) string { return dracore.SlotName(pool, numa, i) }

// ParseDeviceName is dracore.ParseDeviceName.
func ParseDeviceName(name string) (pool string, numa int, slot bool, err error) {
	return dracore.ParseDeviceName(name)
}

// States is dracore.States.
func States() []State { return dracore.States() }

// StatusFile is dracore.StatusFile.
func StatusFile(stateFile string) string { return dracore.StatusFile(stateFile) }

// ReadStatus is dracore.ReadStatus.
func ReadStatus(path string) (s Status, ok bool, err error) { return dracore.ReadStatus(path) }

// nodeName names a NUMA node in messages.
func nodeName(numa int) string { return dracore.NUMAName(numa) }
