package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/pools"
)

// Power configures power classes: named sets of idle and frequency
// settings, and which class each pool's CPUs get (docs/tuning.md "Power classes").
type Power struct {
	// Classes are the named classes.
	Classes map[string]PowerClass `yaml:"classes"`
	// Pools give each pool its classes.
	Pools PowerPools `yaml:"pools"`
	// Unsupported says what happens to a container whose class has a
	// setting this node does not offer (no cpufreq in a VM, no uncore
	// driver): PowerUnsupportedWarn or PowerUnsupportedRefuse.
	Unsupported string `yaml:"unsupported"`
}

// Values of power.unsupported.
const (
	// PowerUnsupportedWarn starts the container without the settings the
	// node lacks; the daemon warns once per class and setting.
	PowerUnsupportedWarn = "warn"
	// PowerUnsupportedRefuse refuses to create the container.
	PowerUnsupportedRefuse = "refuse"
)

// PowerPools are the pools' classes.
type PowerPools struct {
	Exclusive            PowerPool `yaml:"exclusive"`
	ExclusiveNonIsolcpus PowerPool `yaml:"exclusive-non-isolcpus"`
	Shared               PowerPool `yaml:"shared"`
	Infra                PowerPool `yaml:"infra"`
}

// PowerPool is one pool's classes.
type PowerPool struct {
	// Class is the class of the pool's CPUs: of each container's CPUs in
	// an exclusive pool (its default), of the whole pool for shared and
	// infra. Empty leaves them as the node has them.
	Class string `yaml:"class"`
	// Allowed are further classes a container of an exclusive pool may
	// choose with power-class.cpupool.dev (Class is always allowed).
	Allowed []string `yaml:"allowed"`
	// IdleClass is the class of the exclusive pool's CPUs that no
	// container holds. (exclusive-non-isolcpus CPUs nobody holds are
	// infra's, and get infra's class.)
	IdleClass string `yaml:"idleClass"`
}

// PowerClass is one class. Every setting is optional: what a class does
// not set stays as the node has it.
type PowerClass struct {
	// ResumeLatencyUS is written to power/pm_qos_resume_latency_us: the
	// longest wake-up latency the CPU may take, in µs ("0": no limit), or
	// "n/a": none at all, only polling idle.
	ResumeLatencyUS ResumeLatency `yaml:"resumeLatencyUS"`
	// DisabledIdleStates are the names of the cpuidle states to disable
	// (cpuidle/stateN/name, e.g. "C6", "C1E").
	DisabledIdleStates []string `yaml:"disabledIdleStates"`
	// Governor is cpufreq's scaling_governor.
	Governor string `yaml:"governor"`
	// MinFreqKHz and MaxFreqKHz are scaling_min_freq and scaling_max_freq.
	MinFreqKHz Frequency `yaml:"minFreqKHz"`
	MaxFreqKHz Frequency `yaml:"maxFreqKHz"`
	// EnergyPerformancePreference is energy_performance_preference (HWP,
	// amd-pstate-epp).
	EnergyPerformancePreference string `yaml:"energyPerformancePreference"`
	// UncoreMinFreqKHz and UncoreMaxFreqKHz are intel_uncore_frequency's
	// min_freq_khz and max_freq_khz of the dies the class's CPUs are on.
	UncoreMinFreqKHz int64 `yaml:"uncoreMinFreqKHz"`
	UncoreMaxFreqKHz int64 `yaml:"uncoreMaxFreqKHz"`
}

// ResumeLatency is a PM QoS resume latency limit as the kernel writes it:
// a number of µs or "n/a"; "" is unset.
type ResumeLatency string

// ResumeLatencyNone is the limit that allows no wake-up latency.
const ResumeLatencyNone = "n/a"

// UnmarshalYAML reads 10, "10" or "n/a".
func (r *ResumeLatency) UnmarshalYAML(node *yaml.Node) error {
	s := strings.TrimSpace(node.Value)
	if s == ResumeLatencyNone {
		*r = ResumeLatencyNone
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil || node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: resumeLatencyUS %q is not a number of µs (0 for no limit) or \"n/a\" (no wake-up latency at all)", node.Line, s)
	}
	*r = ResumeLatency(strconv.FormatUint(n, 10))
	return nil
}

// Frequency is a CPU frequency: a number of kHz, or one of the CPU's own
// "min" (cpuinfo_min_freq), "max" (cpuinfo_max_freq) or "base"
// (base_frequency); "" is unset.
type Frequency string

// Frequency keywords.
const (
	FrequencyMin  = "min"
	FrequencyMax  = "max"
	FrequencyBase = "base"
)

// UnmarshalYAML reads 2400000, "max", "min" or "base".
func (f *Frequency) UnmarshalYAML(node *yaml.Node) error {
	s := strings.TrimSpace(node.Value)
	switch s {
	case FrequencyMin, FrequencyMax, FrequencyBase:
		*f = Frequency(s)
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 || node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: frequency %q is not a number of kHz (e.g. 2400000) or one of min, max, base", node.Line, s)
	}
	*f = Frequency(strconv.FormatUint(n, 10))
	return nil
}

// KHz returns a numeric frequency; ok is false for a keyword or unset.
func (f Frequency) KHz() (int64, bool) {
	n, err := strconv.ParseInt(string(f), 10, 64)
	return n, err == nil
}

// Empty tells whether the class changes nothing.
func (c PowerClass) Empty() bool {
	return c.ResumeLatencyUS == "" && len(c.DisabledIdleStates) == 0 && c.Governor == "" && c.MinFreqKHz == "" &&
		c.MaxFreqKHz == "" && c.EnergyPerformancePreference == "" && c.UncoreMinFreqKHz == 0 && c.UncoreMaxFreqKHz == 0
}

// PowerPool returns a pool's classes.
func (c *Config) PowerPool(pool string) PowerPool {
	switch pool {
	case pools.Exclusive:
		return c.Power.Pools.Exclusive
	case pools.ExclusiveNonIsolcpus:
		return c.Power.Pools.ExclusiveNonIsolcpus
	case pools.Shared:
		return c.Power.Pools.Shared
	case pools.Infra:
		return c.Power.Pools.Infra
	}
	return PowerPool{}
}

// PowerAllows tells whether a container of pool may choose class.
func (c *Config) PowerAllows(pool, class string) bool {
	pp := c.PowerPool(pool)
	return pools.IsExclusive(pool) && (class == pp.Class || slices.Contains(pp.Allowed, class))
}

// PowerEnabled tells whether any pool has a class.
func (c *Config) PowerEnabled() bool {
	for _, pool := range pools.Names() {
		if pp := c.PowerPool(pool); pp.Class != "" || pp.IdleClass != "" || len(pp.Allowed) > 0 {
			return true
		}
	}
	return false
}

// Bounds of the power section: class names are annotation values.
const (
	// MaxPowerClassName is the longest class name.
	MaxPowerClassName = 63
	// maxIdleStateNames bounds a class's disabledIdleStates.
	maxIdleStateNames = 32
	// uncoreStepKHz is the uncore driver's unit: it keeps whole 100 MHz
	// ratios, so any other value would read back differently.
	uncoreStepKHz = 100000
)

var (
	powerClassName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	sysfsWord      = regexp.MustCompile(`^[A-Za-z0-9_.+-]{1,32}$`)
)

// checkPower validates the power section without the node (package power
// checks what the node offers).
func (c *Config) checkPower(p *Problems) {
	switch c.Power.Unsupported {
	case "", PowerUnsupportedWarn, PowerUnsupportedRefuse:
	default:
		p.Errorf("power.unsupported", "%q is not warn or refuse", c.Power.Unsupported)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Power.Classes)) {
		c.Power.Classes[name].check(p, "power.classes."+name, name)
	}
	known := func(key, name string) {
		if _, ok := c.Power.Classes[name]; !ok && name != "" {
			p.Errorf(key, "no class %q in power.classes (classes: %s)", name, strings.Join(slices.Sorted(maps.Keys(c.Power.Classes)), ", "))
		}
	}
	for _, pool := range pools.Names() {
		pp, key := c.PowerPool(pool), "power.pools."+pool
		known(key+".class", pp.Class)
		for _, name := range pp.Allowed {
			known(key+".allowed", name)
		}
		if len(pp.Allowed) > 0 && !pools.IsExclusive(pool) {
			p.Errorf(key+".allowed", "pool %s's CPUs are shared by its containers, so one container cannot choose their class; set %s.class", pool, key)
		}
		switch {
		case pp.IdleClass != "" && pool == pools.Exclusive:
			known(key+".idleClass", pp.IdleClass)
		case pp.IdleClass != "" && pool == pools.ExclusiveNonIsolcpus:
			p.Errorf(key+".idleClass", "the pool's CPUs that no container holds are infra's; set power.pools.infra.class")
		case pp.IdleClass != "":
			p.Errorf(key+".idleClass", "only the exclusive pool has CPUs that no container holds; set %s.class", key)
		}
	}
}

func (pc PowerClass) check(p *Problems, key, name string) {
	if len(name) > MaxPowerClassName || !powerClassName.MatchString(name) {
		p.Errorf(key, "class names are annotation values: lower-case letters, digits and '-', at most %d bytes", MaxPowerClassName)
	}
	if len(pc.DisabledIdleStates) > maxIdleStateNames {
		p.Errorf(key+".disabledIdleStates", "%d names; at most %d", len(pc.DisabledIdleStates), maxIdleStateNames)
	}
	for _, s := range pc.DisabledIdleStates {
		if !sysfsWord.MatchString(s) {
			p.Errorf(key+".disabledIdleStates", "%q is not an idle state name (cpuidle/stateN/name, e.g. C6)", s)
		}
	}
	if pc.Governor != "" && !sysfsWord.MatchString(pc.Governor) {
		p.Errorf(key+".governor", "%q is not a cpufreq governor name (e.g. performance, powersave, schedutil)", pc.Governor)
	}
	if epp := pc.EnergyPerformancePreference; epp != "" {
		if n, err := strconv.Atoi(epp); (err == nil && (n < 0 || n > 255)) || !sysfsWord.MatchString(epp) {
			p.Errorf(key+".energyPerformancePreference", "%q is not a preference name (e.g. performance, balance_power) or a number 0-255", epp)
		}
		if pc.Governor == "performance" && epp != "performance" {
			p.Errorf(key+".energyPerformancePreference", "%q cannot be set under the performance governor: intel_pstate and amd-pstate fix the preference at performance then (drop one of the two)", epp)
		}
	}
	minKHz, minOK := pc.MinFreqKHz.KHz()
	maxKHz, maxOK := pc.MaxFreqKHz.KHz()
	if minOK && maxOK && minKHz > maxKHz {
		p.Errorf(key+".minFreqKHz", "%d kHz is above maxFreqKHz (%d kHz)", minKHz, maxKHz)
	}
	if pc.MinFreqKHz == FrequencyMax && maxOK {
		p.Errorf(key+".minFreqKHz", "max is above maxFreqKHz (%d kHz) on every CPU that can reach it", maxKHz)
	}
	for _, u := range []struct {
		key string
		khz int64
	}{{".uncoreMinFreqKHz", pc.UncoreMinFreqKHz}, {".uncoreMaxFreqKHz", pc.UncoreMaxFreqKHz}} {
		if u.khz < 0 || u.khz%uncoreStepKHz != 0 || u.khz > 127*uncoreStepKHz {
			p.Errorf(key+u.key, "%d kHz: the uncore driver takes multiples of 100000 kHz up to 12700000", u.khz)
		}
	}
	if pc.UncoreMinFreqKHz > 0 && pc.UncoreMaxFreqKHz > 0 && pc.UncoreMinFreqKHz > pc.UncoreMaxFreqKHz {
		p.Errorf(key+".uncoreMinFreqKHz", "%d kHz is above uncoreMaxFreqKHz (%d kHz)", pc.UncoreMinFreqKHz, pc.UncoreMaxFreqKHz)
	}
}
