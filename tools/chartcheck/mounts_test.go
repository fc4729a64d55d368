package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckMountPaths: two volume mounts of a container at one path. The
// API server refuses such a DaemonSet ("must be unique"), so the chart's
// values config.stateFile=/var/run/nri/state.json (the state directory is
// the NRI socket's), /etc/nri-cpupool/state.json (the config's mount) or
// config.dra.cdiDir=/var/run/nri failed only at helm install, while
// chartcheck passed them.
func TestCheckMountPaths(t *testing.T) {
	for _, tc := range []struct{ name, dir, mountPath, want string }{
		{"state directory at the NRI socket's", "/var/run/nri", "/var/run/nri", "container p mounts volumes nri and state both at /var/run/nri"},
		{"state directory at the config's mount", "/etc/nri-cpupool", "/etc/nri-cpupool", "container p mounts volumes config and state both at /etc/nri-cpupool"},
		{"one path spelt with a trailing slash", "/var/run/nri", "/var/run/nri/", "container p mounts volumes nri and state both at /var/run/nri"},
		{"a mount below another", "/var/run/nri/state", "/var/run/nri/state", ""},
		{"state directory inside the config's mount", "/etc/nri-cpupool/state", "/etc/nri-cpupool/state", "container p mounts volume state at /etc/nri-cpupool/state, inside volume config's mount at /etc/nri-cpupool"},
		{"state directory inside the config's mount, spelt unclean", "/etc//nri-cpupool/./state", "/etc//nri-cpupool/./state/", "container p mounts volume state at /etc/nri-cpupool/state, inside volume config's mount at /etc/nri-cpupool"},
		{"state directory above the config's mount", "/etc", "/etc", "container p mounts volume config at /etc/nri-cpupool, inside volume state's mount at /etc"},
		{"state directory at the root", "", "/", "container p mounts volume config at /etc/nri-cpupool, inside volume state's mount at /"},
		{"a sibling of the config's mount", "/etc/nri-cpupool-state", "/etc/nri-cpupool-state", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered := strings.NewReplacer("    sysfsRoot: /host\n", "    sysfsRoot: /host\n    stateFile: "+tc.dir+"/state.json\n",
				"{name: state, mountPath: /var/lib/nri-cpupool}", "{name: state, mountPath: "+tc.mountPath+"}").Replace(good)
			_, err := check([]byte(rendered))
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
