package config

import (
	"slices"
	"strings"

	"github.com/cpupool/nri-cpupool/pools"
)

// Housekeeping returns a pool's housekeeping value ("" reads as off).
func (c *Config) Housekeeping(pool string) string {
	return poolValue(pool, c.Pools.Exclusive.Housekeeping, c.Pools.Shared.Housekeeping, c.Pools.ExclusiveNonIsolcpus.Housekeeping, HousekeepingOff)
}

// HousekeepingEnabled tells whether any pool keeps host processes off
// its CPUs.
func (c *Config) HousekeepingEnabled() bool { return anyPool(c.Housekeeping, HousekeepingOff) }

// checkHousekeeping validates pools.<pool>.housekeeping: a shared pool's
// CPUs are no one container's, so only the whole pool can be kept; the
// exclusive-non-isolcpus pool's CPUs are infra's until lent, so only the
// lent ones can.
func (c *Config) checkHousekeeping(p *Problems) {
	for _, pk := range []struct {
		pool, value string
		modes       []string
		why         string
	}{
		{pools.Exclusive, c.Pools.Exclusive.Housekeeping, []string{HousekeepingOff, HousekeepingHeld, HousekeepingAlways}, ""},
		{pools.Shared, c.Pools.Shared.Housekeeping, []string{HousekeepingOff, HousekeepingAlways},
			"; a shared pool's CPUs are not any one container's, so only the whole pool can be kept free of host processes"},
		{pools.ExclusiveNonIsolcpus, c.Pools.ExclusiveNonIsolcpus.Housekeeping, []string{HousekeepingOff, HousekeepingHeld},
			"; the pool's CPUs belong to infra, and so to the host, until lent"},
	} {
		if pk.value != "" && !slices.Contains(pk.modes, pk.value) {
			p.Errorf("pools."+pk.pool+".housekeeping", "%q is not one of %s%s", pk.value, strings.Join(pk.modes, ", "), pk.why)
		}
	}
}
