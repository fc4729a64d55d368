package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHousekeepingKeys(t *testing.T) {
	def := Default()
	assert.False(t, def.HousekeepingEnabled(), "off unless a pool asks for it")
	assert.Equal(t, HousekeepingOff, def.Housekeeping(PoolExclusive))

	cfg, err := Parse(strings.NewReader(`
pools:
  exclusive: {housekeeping: always}
  shared: {cpus: "6-7", housekeeping: always}
  exclusive-non-isolcpus: {enabled: true, housekeeping: held}
`), "hk.yaml")
	require.NoError(t, err)
	assert.True(t, cfg.HousekeepingEnabled())
	assert.Equal(t, HousekeepingAlways, cfg.Housekeeping(PoolExclusive))
	assert.Equal(t, HousekeepingAlways, cfg.Housekeeping(PoolShared))
	assert.Equal(t, HousekeepingHeld, cfg.Housekeeping(PoolExclusiveNonIsolcpus))
	assert.Equal(t, HousekeepingOff, cfg.Housekeeping(PoolInfra))

	for _, tc := range []struct{ yaml, want string }{
		{"pools: {exclusive: {housekeeping: optOut}}", `pools.exclusive.housekeeping: "optOut" is not one of off, held, always`},
		{"pools: {shared: {housekeeping: held}}", `pools.shared.housekeeping: "held" is not one of off, always; a shared pool's CPUs are not any one container's`},
		{"pools: {exclusive-non-isolcpus: {housekeeping: always}}", `pools.exclusive-non-isolcpus.housekeeping: "always" is not one of off, held; the pool's CPUs belong to infra`},
	} {
		_, err := Parse(strings.NewReader(tc.yaml), "bad.yaml")
		assert.ErrorContains(t, err, tc.want)
	}
}
