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

// driverConfig is the first opaque config for this driver in an
// allocation, described for a message.
type driverConfig struct {
	// requests names the requests it is for; from whose it is ("the
	// claim's", "its DeviceClass's"); params echoes its parameters.
	requests, from, params string
	class                  bool
}

// findDriverConfig finds the first opaque config for this driver (nil:
// none); want are the claim's requests of this driver, named for a config
// that names no request (it applies to every one).
func findDriverConfig(configs []resourceapi.DeviceAllocationConfiguration, want map[string]wanted) *driverConfig {
	for _, c := range configs {
		o := c.Opaque
		if o == nil || o.Driver != DriverName {
			continue
		}
		reqs := c.Requests
		if len(reqs) == 0 {
			reqs = slices.Sorted(maps.Keys(want))
		}
		found := &driverConfig{requests: requestNames(reqs), from: "the claim's", params: cpulist.Echo(string(o.Parameters.Raw))}
		if c.Source == resourceapi.AllocationConfigSourceClass {
			found.from, found.class = "its DeviceClass's", true
		}
		return found
	}
	return nil
}

// refuseOpaqueConfig refuses the first opaque config for this driver.
func refuseOpaqueConfig(configs []resourceapi.DeviceAllocationConfiguration, want map[string]wanted) error {
	c := findDriverConfig(configs, want)
	if c == nil {
		return nil
	}
	return fmt.Errorf("%s: %s opaque config for driver %s (%s) is refused: %s defines no parameters, and hideHyperthreads, fullPCPUsOnly and pool do not apply to claims "+
		"(the scheduler counts N CPUs and N CPUs are pinned, whole cores and one L3 group where the node has them; the pool is the DeviceClass's: cpupool-exclusive or cpupool-exclusive-non-isolcpus); "+
		"remove the config (see docs/dra.md)", c.requests, c.from, DriverName, c.params, DriverName)
}

// ignoredOpaqueConfig says why the first opaque config for this driver
// ("" when none) is ignored for a claim the driver holds with the same
// allocation, prepared again rather than refused. Removing the config
// cannot help this claim (its allocation, config included, cannot
// change), so the message says what it does not do, and what to change
// for the claims allocated after it, which are refused.
func ignoredOpaqueConfig(configs []resourceapi.DeviceAllocationConfiguration, want map[string]wanted) string {
	c := findDriverConfig(configs, want)
	if c == nil {
		return ""
	}
	where := "the claim's spec (or the ResourceClaimTemplate it came from)"
	if c.class {
		where = "the DeviceClass"
	}
	return fmt.Sprintf("%s: %s opaque config for driver %s (%s) has no effect: %s defines no parameters, and hideHyperthreads, fullPCPUsOnly and pool do not apply to claims. "+
		"Nothing needs doing for this claim, whose allocation cannot change; a claim allocated anew with such config is refused at Prepare, so take it out of %s for those (see docs/dra.md)",
		c.requests, c.from, DriverName, c.params, DriverName, where)
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
