// Package pools is the pool vocabulary every layer shares: the pools'
// names, as written in config keys, annotations and the state file, and
// which kind each pool is. It sits below config, which checks names
// against it, and below the allocator, which gives the pools their CPUs;
// so it imports nothing of this module.
package pools

import "slices"

// The pools.
const (
	// Exclusive hands whole CPUs from the isolated set to one container.
	Exclusive = "exclusive"
	// Shared is an isolated set that its containers share.
	Shared = "shared"
	// Infra is what the other pools leave: system daemons, pod sandboxes
	// and containers without a pool of their own.
	Infra = "infra"
	// ExclusiveNonIsolcpus lends infra's CPUs to one container each.
	ExclusiveNonIsolcpus = "exclusive-non-isolcpus"
)

// Names returns every pool in the stable order reports and state use.
func Names() []string { return []string{Exclusive, Shared, Infra, ExclusiveNonIsolcpus} }

// Known tells whether name is a pool.
func Known(name string) bool { return slices.Contains(Names(), name) }

// IsExclusive tells whether a pool hands out CPUs to one container.
func IsExclusive(name string) bool { return name == Exclusive || name == ExclusiveNonIsolcpus }
