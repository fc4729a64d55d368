// Package e2e is nri-cpupool's end-to-end suite: real runtimes (containerd,
// CRI-O) with NRI, real runc and cgroups, driven through the CRI API, with
// bin/nri-cpupool as an external plugin. Its tests carry the build tag e2e
// and need root: `make e2e` installs the runtimes and runs them.
package e2e
