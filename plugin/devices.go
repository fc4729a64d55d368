package plugin

import (
	"fmt"
	"time"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// localityCache remembers the NUMA nodes of devices. A device's node does
// not change while it exists, but finding it is sysfs I/O under the
// plugin's lock (stats and reads per device): the eight paths of the
// largest legal device annotation took half a millisecond, and a container
// given a GPU or VFIO devices pays it at every creation. Resolutions are
// remembered for a minute (a path re-used by another device after a
// hot-plug is seen again within that), at most maxLocalityCache of them;
// failures are not remembered, so a device that appears later is found at
// once. Guarded by the plugin's lock.
type localityCache map[string]cachedNUMA

const (
	localityCacheTTL = time.Minute
	maxLocalityCache = 4096
)

type cachedNUMA struct {
	node int
	at   time.Time
}

// numa returns the node cached under key, or resolves and caches it.
func (c localityCache) numa(key string, resolve func() (int, error)) (int, error) {
	now := time.Now()
	if d, ok := c[key]; ok && now.Sub(d.at) < localityCacheTTL {
		return d.node, nil
	}
	node, err := resolve()
	if err != nil {
		delete(c, key)
		return node, err
	}
	if len(c) >= maxLocalityCache {
		clear(c) // bounded: tenants choose the paths
	}
	c[key] = cachedNUMA{node: node, at: now}
	return node, nil
}

// resolveDeviceNUMA is the policy's resolver for the device annotation: the
// NUMA node of a sysfs device path.
func (p *Plugin) resolveDeviceNUMA(path string) (int, error) {
	return p.localities.numa("path "+path, func() (int, error) {
		return sysfs.DeviceNUMAResolver(p.cfg.SysfsRoot)(path)
	})
}

// devNodeNUMA is the NUMA node of a device node the runtime gives a
// container.
func (p *Plugin) devNodeNUMA(path, typ string, major, minor int64) (int, error) {
	return p.localities.numa(fmt.Sprintf("dev %s %d:%d %s", typ, major, minor, path), func() (int, error) {
		loc, err := sysfs.DeviceNodeLocality(p.cfg.SysfsRoot, path, typ, major, minor)
		return loc.NUMA, err
	})
}
