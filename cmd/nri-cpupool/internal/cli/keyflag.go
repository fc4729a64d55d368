package cli

import (
	"errors"
	"flag"

	"github.com/cpupool/nri-cpupool/config"
)

// keyFlag is a flag that stands for a config key (run's --log-level for
// logLevel, simulate's --isolated-cpus for isolatedCPUs). Its value is
// checked as the config checks the key (config.Check, the one home of
// that check), when the flag is parsed: a bad value is then a bad flag
// value, refused naming the flag and the value given, with the usage,
// exit 2, rather than an invalid config naming the key (review 58, item
// 14: `logLevel: unknown level "loud"` for `run --log-level loud`).
type keyFlag struct {
	value *string
	key   string
	set   func(c *config.Config, v string)
}

func (f keyFlag) String() string {
	if f.value == nil { // the flag package's zero value, for its defaults
		return ""
	}
	return *f.value
}

func (f keyFlag) Set(s string) error {
	if s == "" { // no override, as before the check (review 58: run --log-level "")
		*f.value = ""
		return nil
	}
	probe := config.Default()
	f.set(probe, s)
	for _, p := range probe.Check().Errors() {
		if p.Key == f.key {
			return errors.New(p.Message)
		}
	}
	*f.value = s
	return nil
}

// keyFlagVar defines a string flag for the config key key, which set
// gives a config.
func keyFlagVar(fs *flag.FlagSet, name, key, usage string, set func(c *config.Config, v string)) *string {
	var v string
	fs.Var(keyFlag{value: &v, key: key, set: set}, name, usage)
	return &v
}
