package dra

// Opaque config for this driver in a claim's allocation
// (status.allocation.devices.config, from the claim or its DeviceClass):
// the driver defines no parameters, so any is refused at Prepare, naming
// the requests it was for, rather than prepared as if it were not there.
// A user who writes `{"fullPCPUsOnly": true}` believes it applies; the
// container would get CPUs that ignore it. Config for other drivers is
// theirs, and left alone.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// maxRequestNames is how many request names the refusal lists.
const maxRequestNames = 3

// refuseOpaqueConfig refuses the first opaque config for this driver;
// want are the claim's requests of this driver, named for a config that
// names no request (it applies to every one).
func refuseOpaqueConfig(configs []resourceapi.DeviceAllocationConfiguration, want map[string]wanted) error {
	for _, c := range configs {
		o := c.Opaque
		if o == nil || o.Driver != DriverName {
			continue
		}
		reqs := c.Requests
		if len(reqs) == 0 {
			reqs = slices.Sorted(maps.Keys(want))
		}
		from := "the claim's"
		if c.Source == resourceapi.AllocationConfigSourceClass {
			from = "its DeviceClass's"
		}
		return fmt.Errorf("%s: %s opaque config for driver %s (%s) is refused: %s defines no parameters, and hideHyperthreads, fullPCPUsOnly and pool do not apply to claims "+
			"(the scheduler counts N CPUs and N CPUs are pinned, whole cores and one L3 group where the node has them; the pool is the DeviceClass's: cpupool-exclusive or cpupool-exclusive-non-isolcpus); "+
			"remove the config (see docs/dra.md)", requestNames(reqs), from, DriverName, cpulist.Echo(string(o.Parameters.Raw)), DriverName)
	}
	return nil
}

// requestNames names a config's requests for a message, a few at most:
// a config may name up to 32, each up to 63 bytes (a request of a
// prioritized list as "request/subrequest").
func requestNames(reqs []string) string {
	if len(reqs) == 0 {
		return "the claim"
	}
	noun := "request"
	if len(reqs) > 1 {
		noun = "requests"
	}
	shown := reqs[:min(len(reqs), maxRequestNames)]
	quoted := make([]string, len(shown))
	for i, r := range shown {
		quoted[i] = cpulist.Echo(r)
	}
	out := noun + " " + strings.Join(quoted, ", ")
	if more := len(reqs) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}
