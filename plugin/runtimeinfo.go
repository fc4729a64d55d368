package plugin

import (
	"strings"

	"github.com/containerd/nri/pkg/version"
)

// minNRIForPluginUpdates is the first NRI release whose runtime side takes a
// plugin's own UpdateContainers call without risking a deadlock: before it,
// the runtime's NRI adaptation held its lock across the runtime's update
// callback, the inverse of the order every event takes
// (containerd/nri#301, containerd/containerd#13733).
const minNRIForPluginUpdates = "v0.12.1"

// runtimeInfo is what the runtime told the plugin about itself at Configure.
type runtimeInfo struct {
	name, version string
	// nriVersion is the NRI version the runtime embeds: sent by NRI ≥ v0.12,
	// otherwise inferred by the NRI library from the runtime's version, or
	// "unknown" (CRI-O sends none).
	nriVersion string
}

// pluginUpdatesSafe tells whether the plugin may call UpdateContainers on its
// own (after RemoveContainer and RemovePodSandbox). An unknown version is
// treated as an old one: the updates then wait for the next reply.
func (r runtimeInfo) pluginUpdatesSafe() bool {
	return nriAtLeast(r.nriVersion, minNRIForPluginUpdates)
}

// nriAtLeast compares semantic versions ("v0.12.3"); anything that is not one
// (empty, "unknown", "devel") is not at least anything.
func nriAtLeast(v, min string) bool {
	if !strings.HasPrefix(v, "v") || strings.Count(v, ".") < 2 {
		return false
	}
	return version.FindClosestMatch(v, []string{min}) == min
}
