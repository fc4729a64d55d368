package config

import (
	"bytes"
	"testing"
)

// FuzzParse: any file is accepted with valid lists or refused with an
// error; never a panic or a hang.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "defaultPool: shared\n", "reservedCPUs: \"0-9223372036854775807\"\n",
		"pools: {exclusive: {cpus: \"4-7\"}, shared: {count: 2}}\n", "a: &a [*a, *a]\n", "isolatedCPUs: \"+1\"\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(bytes.NewReader(data), "fuzz.yaml")
		if err != nil {
			return
		}
		if cfg.Check().HasErrors() {
			t.Fatalf("accepted a config its checks refuse: %q", data)
		}
		for _, l := range []string{cfg.ReservedCPUs, cfg.Pools.Exclusive.CPUs, cfg.Pools.Shared.CPUs} {
			if _, err := ParseCPUList(l); err != nil {
				t.Fatalf("accepted list %q: %v", l, err)
			}
		}
	})
}
