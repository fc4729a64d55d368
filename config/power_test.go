package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPowerKeys(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`
power:
  classes:
    low-latency:
      resumeLatencyUS: n/a
      disabledIdleStates: [C1E, C6]
      governor: performance
      minFreqKHz: max
      maxFreqKHz: max
      uncoreMinFreqKHz: 2400000
      uncoreMaxFreqKHz: 2400000
    balanced: {resumeLatencyUS: 20, governor: powersave, energyPerformancePreference: balance_performance, maxFreqKHz: 3000000}
    saver: {energyPerformancePreference: power, minFreqKHz: min}
    as-booted: {}
  pools:
    exclusive: {class: low-latency, allowed: [balanced, as-booted], idleClass: saver}
    exclusive-non-isolcpus: {class: balanced}
    shared: {class: balanced}
    infra: {class: saver}
  unsupported: refuse
`), "power.yaml")
	require.NoError(t, err)
	ll := cfg.Power.Classes["low-latency"]
	assert.Equal(t, ResumeLatency("n/a"), ll.ResumeLatencyUS)
	assert.Equal(t, Frequency("max"), ll.MinFreqKHz)
	assert.Equal(t, int64(2400000), ll.UncoreMaxFreqKHz)
	assert.Equal(t, ResumeLatency("20"), cfg.Power.Classes["balanced"].ResumeLatencyUS)
	khz, ok := cfg.Power.Classes["balanced"].MaxFreqKHz.KHz()
	assert.True(t, ok)
	assert.Equal(t, int64(3000000), khz)
	assert.True(t, cfg.Power.Classes["as-booted"].Empty())
	assert.Equal(t, PowerUnsupportedRefuse, cfg.Power.Unsupported)
	assert.True(t, cfg.PowerEnabled())
	assert.True(t, cfg.PowerAllows(PoolExclusive, "low-latency"), "the pool's class")
	assert.True(t, cfg.PowerAllows(PoolExclusive, "as-booted"))
	assert.False(t, cfg.PowerAllows(PoolExclusive, "saver"), "the idle class is not a container's choice")
	assert.False(t, cfg.PowerAllows(PoolShared, "balanced"), "shared CPUs are not one container's")
	assert.False(t, Default().PowerEnabled())
	assert.Equal(t, PowerUnsupportedWarn, Default().Power.Unsupported)
}

func TestPowerErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown class", `power: {pools: {exclusive: {class: fast}}}`, `power.pools.exclusive.class: no class "fast" in power.classes`},
		{"unknown allowed", `power: {classes: {a: {}}, pools: {exclusive: {class: a, allowed: [b]}}}`, `power.pools.exclusive.allowed: no class "b"`},
		{"allowed on shared", `power: {classes: {a: {}}, pools: {shared: {allowed: [a]}}}`, "power.pools.shared.allowed: pool shared's CPUs are shared"},
		{"idle class of exclusive-non-isolcpus", `power: {classes: {a: {}}, pools: {exclusive-non-isolcpus: {idleClass: a}}}`, "are infra's; set power.pools.infra.class"},
		{"idle class of infra", `power: {classes: {a: {}}, pools: {infra: {idleClass: a}}}`, "power.pools.infra.idleClass: only the exclusive pool"},
		{"class name", `power: {classes: {Fast_One: {}}}`, "power.classes.Fast_One: class names are annotation values"},
		{"latency word", `power: {classes: {a: {resumeLatencyUS: none}}}`, `resumeLatencyUS "none" is not a number of µs`},
		{"latency negative", `power: {classes: {a: {resumeLatencyUS: -1}}}`, `resumeLatencyUS "-1"`},
		{"frequency word", `power: {classes: {a: {maxFreqKHz: turbo}}}`, `frequency "turbo" is not a number of kHz`},
		{"frequency zero", `power: {classes: {a: {maxFreqKHz: 0}}}`, `frequency "0"`},
		{"min above max", `power: {classes: {a: {minFreqKHz: 3000000, maxFreqKHz: 2000000}}}`, "power.classes.a.minFreqKHz: 3000000 kHz is above maxFreqKHz"},
		{"min max over a number", `power: {classes: {a: {minFreqKHz: max, maxFreqKHz: 2000000}}}`, "power.classes.a.minFreqKHz: max is above"},
		{"uncore step", `power: {classes: {a: {uncoreMaxFreqKHz: 2450000}}}`, "uncoreMaxFreqKHz: 2450000 kHz: the uncore driver takes multiples of 100000"},
		{"uncore order", `power: {classes: {a: {uncoreMinFreqKHz: 2400000, uncoreMaxFreqKHz: 1200000}}}`, "uncoreMinFreqKHz: 2400000 kHz is above"},
		{"epp under performance", `power: {classes: {a: {governor: performance, energyPerformancePreference: power}}}`, "cannot be set under the performance governor"},
		{"epp number", `power: {classes: {a: {energyPerformancePreference: "300"}}}`, `"300" is not a preference name`},
		{"governor word", `power: {classes: {a: {governor: "per formance"}}}`, "is not a cpufreq governor name"},
		{"idle state word", `power: {classes: {a: {disabledIdleStates: ["C6 "]}}}`, "is not an idle state name"},
		{"unsupported", `power: {unsupported: ignore}`, `power.unsupported: "ignore" is not warn or refuse`},
		{"unknown key", `power: {classes: {a: {maxFreq: 1}}}`, "unknown key power.classes.a.maxFreq; did you mean power.classes.a.maxFreqKHz?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.yaml), "power.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
