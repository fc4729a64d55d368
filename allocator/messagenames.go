package allocator

// How messages name a container when they have no name at hand (the
// runtime's 64-hex id, cut to 12 as `nri-cpupool status` and the runtimes'
// own tools, crictl and nerdctl, show it) and a pool with its CPUs as now
// configured.

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/plural"
)

// shortIDLen is how much of a container id messages show.
const shortIDLen = 12

// ShortID is a container id as messages show it: its first 12 characters.
func ShortID(id string) string {
	if len(id) > shortIDLen {
		return id[:shortIDLen]
	}
	return id
}

// poolAsConfigured names a pool with its CPUs as now configured, for the
// messages that tell CPUs outside it: "pool exclusive (5-7,13-15)", or
// "pool exclusive, which has no CPUs" rather than an empty "()".
func poolAsConfigured(pool string, cpus cpuset.CPUSet) string {
	if cpus.IsEmpty() {
		return fmt.Sprintf("pool %s, which has no CPUs", pool)
	}
	return fmt.Sprintf("pool %s (%s)", pool, cpus)
}

// outsidePool says which CPUs lie outside a pool as now configured: "CPUs
// 4,12 are outside pool exclusive (5-7,13-15) as now configured".
func outsidePool(out cpuset.CPUSet, pool string, cpus cpuset.CPUSet) string {
	return fmt.Sprintf("%s %s outside %s as now configured", plural.CPUs(out), plural.Verb(out.Size(), "is", "are"), poolAsConfigured(pool, cpus))
}
