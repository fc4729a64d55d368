package plugin

// runtimeInfo is what the runtime told the plugin about itself at Configure,
// shown as cpupool_runtime_info.
//
// The handlers never call UpdateContainers on their own, whatever the
// runtime's NRI version: such an update travels beside the replies, so the
// runtime could apply an older "infra grew" after a newer "infra shrank"
// (and NRI before v0.12.1 could deadlock on it, containerd/nri#301).
// Updates that a removal causes ride on the next reply instead (see
// deferFollowers). A config reload and a CPU going offline, which no
// container event follows, are the exception, made safe in push.go.
type runtimeInfo struct {
	name, version string
	// nriVersion is the NRI version the runtime embeds: sent by NRI >= v0.12,
	// otherwise inferred by the NRI library from the runtime's version, or
	// "unknown" (CRI-O sends none).
	nriVersion string
}
