package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestHelmSchemaAcceptsWhatTheBinaryAccepts: every value in the table is
// one the binary takes (Parse accepts it, which the test checks first), and
// the chart's schema must take it too, or `helm upgrade` of a release that
// runs with it fails where validate exits 0 (docs/commands.md). The key
// and type comparison of TestHelmSchemaConfigIsTheBinarys cannot see this:
// the schema refused `logLevel: DEBUG`, strided CPU lists ("2-15:2/4") and
// `memory.reservedPerNode: 1024` (a number, as `--set` gives it), all of
// which the binary takes (review 58). The schema is checked with the
// library Helm checks values with (santhosh-tekuri/jsonschema, Go's regexp).
func TestHelmSchemaAcceptsWhatTheBinaryAccepts(t *testing.T) {
	schema := compileHelmSchema(t)
	var refused []string
	for _, cfg := range acceptedConfigs() {
		doc, err := yaml.Marshal(cfg)
		require.NoError(t, err)
		if _, err := Parse(bytes.NewReader(doc), "table"); err != nil {
			t.Fatalf("the table must hold what the binary accepts; it refuses %s: %v", doc, err)
		}
		if err := schema.Validate(asValues(t, cfg)); err != nil {
			lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
			refused = append(refused, fmt.Sprintf("%q: %s", strings.TrimSpace(string(doc)), strings.TrimSpace(lines[len(lines)-1])))
		}
	}
	assert.Empty(t, refused, "values.schema.json refuses values the binary accepts:\n%s", strings.Join(refused, "\n"))
}

// TestHelmSchemaStillRefusesNonsense: loosening the schema kept its point,
// a refusal before rendering, for values the binary refuses as well.
func TestHelmSchemaStillRefusesNonsense(t *testing.T) {
	schema := compileHelmSchema(t)
	for _, cfg := range []map[string]any{
		{"logLevel": "verbose"},
		{"logLevel": "in fo"},
		{"isolatedCPUs": "0-3x"},
		{"isolatedCPUs": "all"},
		{"reservedCPUs": "0-3;8"},
		{"pools": map[string]any{"exclusive": map[string]any{"cpus": "two"}}},
		{"irq": map[string]any{"rescanInterval": "ten seconds"}},
		{"defaultPool": "Exclusive"},
		{"memory": map[string]any{"reservedPerNode": -1}},
	} {
		doc, err := yaml.Marshal(cfg)
		require.NoError(t, err)
		_, err = Parse(bytes.NewReader(doc), "table")
		require.Error(t, err, "the binary accepts %s: not nonsense", doc)
		assert.Error(t, schema.Validate(asValues(t, cfg)), "the schema accepts %s", doc)
	}
}

// acceptedConfigs are config documents, one key's value each mostly, that
// the binary accepts: every spelling of every key with a closed set of
// values the code accepts, CPU lists in every form the parser takes, and
// numbers where the binary takes a number for a text key.
func acceptedConfigs() []map[string]any {
	var out []map[string]any
	add := func(path string, v any) { out = append(out, nested(path, v)) }
	// ParseLogLevel ignores case: every case of every name.
	for _, level := range []string{"trace", "debug", "info", "warn", "warning", "error"} {
		for _, s := range caseSpellings(level) {
			add("logLevel", s)
		}
	}
	// CPU lists (ParseCPUList): the kernel's syntax with strides, spaces
	// anywhere, any Unicode space around, a number.
	lists := []any{"", "0", "0-3", "0-3,8", "0-3, 8", " 0 - 3 , 8 ", "2-15:2/4", "0-7:0/4", "0-7:4/4", "1,2-15:1/2,40-47", 3}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) {
			lists = append(lists, string(r)+"0-3:1/2"+string(r))
		}
	}
	for _, key := range []string{"isolatedCPUs", "reservedCPUs", "pools.exclusive.cpus", "pools.shared.cpus"} {
		for _, l := range lists {
			add(key, l)
		}
	}
	// Quantities, durations, numbers: numbers where the key takes them.
	for _, v := range []any{"2Gi", "1e9", "1.5Gi", 0, 1024, int64(1) << 40, 1.5} {
		add("memory.reservedPerNode", v)
	}
	for _, v := range []any{"1s", "10s", "1m30s", "+10s", " 10s", ".5m", "1.5s", "10s\t"} {
		add("irq.rescanInterval", v)
	}
	class := func(key string, v any) map[string]any {
		return nested("power.classes.c."+key, v)
	}
	for _, v := range []any{0, 10, "10", "n/a", " n/a"} {
		out = append(out, class("resumeLatencyUS", v))
	}
	for _, v := range []any{2400000, "2400000", "min", "max", "base"} {
		out = append(out, class("maxFreqKHz", v), class("minFreqKHz", v))
	}
	for _, v := range []any{0, 128, 255, "128", "performance", "balance_power"} {
		out = append(out, class("energyPerformancePreference", v))
	}
	out = append(out, class("disabledIdleStates", []any{"C6", 6}), class("uncoreMaxFreqKHz", 2400000), class("governor", "schedutil"))
	for _, pool := range pools.Names() {
		c := nested("power.classes.1.governor", "schedutil")
		c["power"].(map[string]any)["pools"] = nested(pool+".class", 1)
		out = append(out, c)
		add("allowedNamespaces."+pool, []any{"kube-system", 123})
		add("defaultPool", pool)
	}
	c := nested("power.classes.1.governor", "schedutil")
	c["power"].(map[string]any)["pools"] = nested("exclusive.idleClass", 1)
	c["power"].(map[string]any)["pools"].(map[string]any)["exclusive"].(map[string]any)["allowed"] = []any{1}
	out = append(out, c)
	add("kubernetes.nodeName", 123)
	add("dra.nodeName", 123)
	add("memory.reservedHugePagesPerNode.2Mi", 16)
	add("pluginIndex", 0)
	add("pluginIndex", 99)
	add("pools.exclusive.count", 0)
	add("pools.exclusive-non-isolcpus.minInfraCPUs", 1)
	// The closed sets, as the code's checks list them.
	enums := map[string][]string{
		"dra.devices":                                    {DRADevicesNUMANode, DRADevicesCPU},
		"irq.irqbalance":                                 {"socket", "off"},
		"kernelWork.receivePacketSteering":               {"", KernelWorkOff, KernelWorkHeld},
		"kernelWork.workqueues":                          {"", KernelWorkOff, KernelWorkHeld},
		"power.unsupported":                              {"", PowerUnsupportedWarn, PowerUnsupportedRefuse},
		"pools.exclusive.irqIsolation":                   {"", IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut, IRQIsolationAlways},
		"pools.shared.irqIsolation":                      {"", IRQIsolationOff, IRQIsolationAlways},
		"pools.exclusive-non-isolcpus.irqIsolation":      {"", IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut},
		"pools.exclusive.isolatedPartition":              {"", IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut},
		"pools.exclusive-non-isolcpus.isolatedPartition": {"", IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut},
		"pools.shared.isolatedPartition":                 {"", IRQIsolationOff},
	}
	for key, values := range enums {
		for _, v := range values {
			add(key, v)
		}
	}
	return out
}

// caseSpellings are all the ways of writing s in upper and lower case.
func caseSpellings(s string) []string {
	out := []string{""}
	for _, r := range s {
		var next []string
		for _, p := range out {
			next = append(next, p+string(unicode.ToLower(r)), p+string(unicode.ToUpper(r)))
		}
		out = next
	}
	return out
}

// nested is {a: {b: v}} for "a.b".
func nested(path string, v any) map[string]any {
	keys := strings.Split(path, ".")
	m := map[string]any{keys[len(keys)-1]: v}
	for i := len(keys) - 2; i >= 0; i-- {
		m = map[string]any{keys[i]: m}
	}
	return m
}

// asValues is the chart's values (values.yaml) with cfg merged into its
// config, as Helm coalesces a user's values onto the chart's before it
// checks them (the schema requires the keys the templates read), as the
// schema library reads JSON.
func asValues(t *testing.T, cfg map[string]any) any {
	t.Helper()
	text, err := os.ReadFile("../deploy/helm/nri-cpupool/values.yaml")
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(text, &values))
	values["config"] = merged(values["config"], cfg)
	data, err := json.Marshal(values)
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err)
	return v
}

// merged is over's keys set onto base's, mappings merged key by key.
func merged(base, over any) any {
	b, ok1 := base.(map[string]any)
	o, ok2 := over.(map[string]any)
	if !ok1 || !ok2 {
		return over
	}
	out := make(map[string]any, len(b))
	for k, v := range b {
		out[k] = v
	}
	for k, v := range o {
		out[k] = merged(b[k], v)
	}
	return out
}

func compileHelmSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(helmSchema)
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("values.schema.json", doc))
	s, err := c.Compile("values.schema.json")
	require.NoError(t, err)
	return s
}
