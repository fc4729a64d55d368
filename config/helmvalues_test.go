package config

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// helmPodKeys are the keys whose value in the chart's values.yaml is not
// the binary's default because of the chart's pod: where it mounts the
// host's /sys and cgroup tree, and the metrics address its probes use.
var helmPodKeys = map[string]any{
	"sysfsRoot":      "/host",
	"cgroupRoot":     "/host/sys/fs/cgroup",
	"metricsAddress": "127.0.0.1:9464",
}

// TestHelmValuesConfigIsTheBinarys keeps the Helm chart's `config` value
// (deploy/helm/nri-cpupool/values.yaml) in step with this package: every
// key of Config is there, with the binary's default (helmPodKeys aside),
// and nothing else; and the daemon's own parser takes it.
func TestHelmValuesConfigIsTheBinarys(t *testing.T) {
	data, err := os.ReadFile("../deploy/helm/nri-cpupool/values.yaml")
	require.NoError(t, err)
	var values struct {
		Config yaml.Node `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	require.NotZero(t, values.Config.Kind, "values.yaml has no config")
	text, err := yaml.Marshal(&values.Config)
	require.NoError(t, err)

	_, err = Parse(bytes.NewReader(text), "values.yaml config")
	require.NoError(t, err, "the daemon refuses the chart's default config")

	var got map[string]any
	require.NoError(t, yaml.Unmarshal(text, &got))
	want := Default()
	defaults, err := yaml.Marshal(want)
	require.NoError(t, err)
	var wantMap map[string]any
	require.NoError(t, yaml.Unmarshal(defaults, &wantMap))
	for key, v := range helmPodKeys {
		require.Contains(t, wantMap, key)
		wantMap[key] = v
	}
	// The per-pool modes' default "" reads as off (Config.IRQIsolation,
	// IsolatedPartition, Housekeeping); values.yaml spells it out.
	for _, pool := range []string{"exclusive", "shared", "exclusive-non-isolcpus"} {
		spec := wantMap["pools"].(map[string]any)[pool].(map[string]any)
		for _, key := range []string{"irqIsolation", "housekeeping", "isolatedPartition"} {
			if spec[key] == "" {
				spec[key] = IRQIsolationOff
			}
		}
	}
	// So does kernelWork's (RPSHeld, WorkqueuesHeld).
	kw := wantMap["kernelWork"].(map[string]any)
	for key, v := range kw {
		if v == "" {
			kw[key] = KernelWorkOff
		}
	}
	// An empty map or list and none are the same config.
	assert.Equal(t, emptyToNil(wantMap), emptyToNil(got),
		"values.yaml's config differs from config.Default(): add the key with the binary's default and a comment (and to packaging/config.yaml)")
}

func emptyToNil(v any) any {
	switch v := v.(type) {
	case []any:
		if len(v) == 0 {
			return nil
		}
	case map[string]any:
		if len(v) == 0 {
			return nil
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = emptyToNil(e)
		}
		return out
	}
	return v
}
