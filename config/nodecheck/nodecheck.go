// Package nodecheck is the one check of a config against the node, shared
// by `validate`, the daemon's start and a reload: what run accepts,
// validate accepts, and the packaged unit, which runs validate before run
// (ExecStartPre=), starts with it. Two copies drifted apart once: a listed
// CPU that was offline made validate fail while run started with a
// warning, so after a node rebooted with a failed core the unit never
// started and every container started unpinned. It sits below the plugin
// so that `validate` reads the node as the daemon does without linking the
// daemon.
package nodecheck

import (
	"fmt"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/power"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Check lays cfg out on topo and reports every problem, with its key, as
// the daemon judges it: an error is what stops run (and a reload), a
// warning what run starts with and logs. A CPU a list names that is
// offline now is a warning: the kernel may have taken it offline (a failed
// core, a node rebooted without it), and the daemon that refused to start
// would leave every new container unpinned; it joins its pool when it
// comes online (plugin/hotplug.go). The node's power files are read: call
// it off the plugin's lock. The layout is usable only when no problem is an
// error.
func Check(topo *sysfs.Topology, cfg *config.Config) (*allocator.Layout, config.Problems) {
	layout, problems := allocator.BuildLayoutRunning(topo, cfg)
	problems = append(problems, power.NewNode(cfg.SysfsRoot, topo).Check(cfg)...)
	if !problems.HasErrors() {
		problems = append(problems, housekeeping.Check(cfg, layout)...)
	}
	return layout, problems
}

// Node is topo as the daemon lays it out: with the CPUs the hypervisor
// hot-removed put back as offline CPUs at the place they had while
// present, as the daemon remembered them beside cfg's state file
// (sysfs.Topology.WithRemembered; plugin/remembered.go). A record that
// cannot be read is returned as an error with topo as it is: the daemon
// then says so and lays the pools out on the node as it is. dropped are
// the record's entries not put back (sysfs.Topology.RememberedDropped),
// one line each, which the daemon warns of once at its start.
func Node(topo *sysfs.Topology, cfg *config.Config) (_ *sysfs.Topology, dropped []string, _ error) {
	rec, err := sysfs.ReadRemembered(sysfs.RememberedPath(cfg.StateFile))
	if err != nil {
		return topo, nil, fmt.Errorf("reading the remembered CPUs: %w", err)
	}
	return topo.WithRemembered(rec), topo.RememberedDropped(rec), nil
}
