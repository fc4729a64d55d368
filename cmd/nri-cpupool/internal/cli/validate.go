package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("validate", "validate --config F [--sysfs-root D]", stderr)
	cfgPath := configFlag(fs, "configuration file to check")
	root := fs.String("sysfs-root", "", sysfsRootUsage)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	// Read as run reads it: a missing default file is the built-in
	// defaults there, so it is valid here too.
	cfg, err := loadRunConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	if _, err := os.Stat(*cfgPath); err != nil {
		fmt.Fprintf(stderr, "warning: %s does not exist: checking the built-in defaults, which run uses then\n", *cfgPath)
	}
	cfg.SysfsRoot = sysfsRoot(*root, cfg) // as run's --sysfs-root
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	if err != nil {
		return err
	}
	// The node as the daemon lays it out: hot-removed CPUs it remembers
	// are offline CPUs of their pools.
	var dropped []string
	if topo, dropped, err = nodecheck.Node(topo, cfg); err != nil {
		fmt.Fprintf(stderr, "warning: %v; hot-removed CPUs are not put back in their pools\n", err)
	}
	printRememberedDropped(stderr, sysfs.RememberedPath(cfg.StateFile), dropped)
	// The daemon's own check (start and reload): validate fails exactly
	// when run would not start, since the unit runs it first.
	layout, problems := nodecheck.Check(topo, cfg)
	if !problems.HasErrors() {
		// What only validate says: warnings, never an error run lacks.
		problems = append(problems, hugePageProblems(cfg, topo, layout)...)
		if cfg.DRA.Enabled {
			if w := dracore.ClaimLimit(cfg.DRA.Devices, dracore.Offer(topo, layout, nil)); w != "" {
				problems.Warnf("dra.devices", "%s", w)
			}
		}
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, p)
	}
	if problems.HasErrors() {
		fmt.Fprintf(stderr, "%s: %s, %s: not valid for this node\n", *cfgPath, plural.Count(len(problems.Errors()), "error"), plural.Count(len(problems.Warnings()), "warning"))
		return exitError{1}
	}
	fmt.Fprintf(stdout, "%s: valid for this node (%s, %s), %s\n", *cfgPath, plural.Count(topo.Online.Size(), "online CPU"), plural.Count(len(topo.NUMANodes), "NUMA node"), plural.Count(len(problems.Warnings()), "warning"))
	fmt.Fprintf(stdout, "  exclusive:              %s (%s)\n", orDash(layout.Exclusive.String()), plural.Count(layout.Exclusive.Size(), "CPU"))
	fmt.Fprintf(stdout, "  shared:                 %s (%s)\n", orDash(layout.Shared.String()), plural.Count(layout.Shared.Size(), "CPU"))
	fmt.Fprintf(stdout, "  infra:                  %s (%s, reserved %s)\n", orDash(layout.Infra.String()), plural.Count(layout.Infra.Size(), "CPU"), orDash(layout.Reserved.String()))
	fmt.Fprintf(stdout, "  exclusive-non-isolcpus: %s (%s lendable)\n", orDash(layout.ExclusiveNonIsolcpus.String()), plural.Count(layout.ExclusiveNonIsolcpus.Size(), "CPU"))
	printNodeMemory(stdout, cfg, topo)
	printPoolPowerClasses(stdout, cfg)
	printKubeletSettings(stdout, cfg, topo, layout)
	return nil
}

// printRememberedDropped lists the entries of the daemon's record of
// hot-removed CPUs (path) that are not put back in their pools (a negative
// or repeated CPU id, a NUMA node this node lacks: a hand-edited or copied
// file), which the daemon drops with one warning at its start: validate
// said nothing of them, and a hot-removed CPU they name is then missing
// from its pool, or the config naming it refused, with no word why. The
// lines are warnings outside the count of the summary, as the warning of
// an unreadable record is: its lines and the exit code stay the daemon's.
func printRememberedDropped(w io.Writer, path string, dropped []string) {
	if len(dropped) == 0 {
		return
	}
	n := len(dropped)
	fmt.Fprintf(w, "warning: %s: %d %s of the remembered CPUs %s not put back in %s, as the daemon drops %s too:\n",
		path, n, plural.Verb(n, "entry", "entries"), plural.Verb(n, "is", "are"), plural.Verb(n, "its pool", "their pools"), plural.Verb(n, "it", "them"))
	for _, d := range dropped {
		fmt.Fprintf(w, "  %s\n", d)
	}
	fmt.Fprintf(w, "  fix or remove %s, or delete %s while the daemon is stopped (it then remembers the CPUs present at its start; a CPU hot-removed by then is no longer put back, and a config naming it is refused)\n",
		plural.Verb(n, "that entry", "those entries"), path)
}

// printPoolPowerClasses says which class each pool's CPUs get.
func printPoolPowerClasses(w io.Writer, cfg *config.Config) {
	if !cfg.PowerEnabled() {
		return
	}
	var parts []string
	for _, pool := range pools.Names() {
		pp := cfg.PowerPool(pool)
		s := pool + " " + orDash(pp.Class)
		if len(pp.Allowed) > 0 {
			s += " (may choose " + strings.Join(pp.Allowed, ", ") + ")"
		}
		if pp.IdleClass != "" {
			s += ", its idle CPUs " + pp.IdleClass
		}
		parts = append(parts, s)
	}
	fmt.Fprintf(w, "  power classes: %s\n", strings.Join(parts, "; "))
}

// printKubeletSettings recommends the kubelet's reservation so that the
// scheduler counts each CPU once: exclusive CPUs as cpupool.dev/exclusive,
// infra as allocatable cpu, and shared in neither (its containers' cpu
// requests are counted against infra, so infra is never overcommitted).
func printKubeletSettings(w io.Writer, cfg *config.Config, topo *sysfs.Topology, layout *allocator.Layout) {
	if cfg.DRA.Enabled {
		printDRASettings(w, cfg, topo, layout)
		return
	}
	if !cfg.Kubelet.DevicePlugin {
		fmt.Fprintf(w, "kubelet: the device plugin is off (kubelet.devicePlugin); exclusive CPUs are asked for by annotation and counted in allocatable cpu\n")
		return
	}
	reserve := layout.Exclusive.Size() + layout.Shared.Size()
	fmt.Fprintf(w, "kubelet: advertises %s = %d (CPUs %s)\n", config.ResourceExclusive, layout.Exclusive.Size(), orDash(layout.Exclusive.String()))
	fmt.Fprintf(w, "  recommended KubeletConfiguration (add your own system reservation to kubeReserved.cpu):\n")
	fmt.Fprintf(w, "    cpuManagerPolicy: none\n")
	fmt.Fprintf(w, "    kubeReserved: {cpu: \"%d\"}\n", reserve)
	if len(topo.NUMANodes) > 1 {
		fmt.Fprintf(w, "    topologyManagerPolicy: best-effort\n")
	}
	fmt.Fprintf(w, "  so: allocatable cpu = %d online - %d exclusive - %d shared = %d (infra %s); pods of %s request it, not cpu\n",
		topo.Online.Size(), layout.Exclusive.Size(), layout.Shared.Size(), topo.Online.Size()-reserve, orDash(layout.Infra.String()), config.ResourceExclusive)
	if len(topo.NUMANodes) > 1 {
		fmt.Fprintf(w, "  topologyManagerPolicy aligns %s with GPUs and NICs on %s (restricted or single-numa-node refuse misaligned pods)\n", config.ResourceExclusive, plural.Count(len(topo.NUMANodes), "NUMA node"))
	}
}

// printDRASettings is printKubeletSettings for the DRA route. The claims'
// CPUs are counted by the scheduler through the ResourceSlices, and not in
// allocatable cpu (KEP-5517, which would, is alpha and off in 1.36): the
// exclusive and shared CPUs are reserved from cpu as on the device plugin
// route, and the CPUs of exclusive-non-isolcpus claims, which infra lends,
// are counted by the pod's own cpu request.
func printDRASettings(w io.Writer, cfg *config.Config, topo *sysfs.Topology, layout *allocator.Layout) {
	var offer []string
	for _, g := range dracore.Offer(topo, layout, nil) {
		offer = append(offer, fmt.Sprintf("%s on NUMA node %d: %d", g.Pool, g.NUMA, g.Slots))
	}
	unit := "one device per pool and NUMA node, capacity " + dracore.CapacityCPUs
	if cfg.DRA.Devices == config.DRADevicesCPU {
		unit = "one device per CPU"
	}
	fmt.Fprintf(w, "kubelet: DRA driver %s (dra.devices: %s, %s) offers %s\n", dracore.DriverName, cfg.DRA.Devices, unit, orDash(strings.Join(offer, ", ")))
	reserve := layout.Exclusive.Size() + layout.Shared.Size()
	fmt.Fprintf(w, "  recommended KubeletConfiguration (add your own system reservation to kubeReserved.cpu):\n")
	fmt.Fprintf(w, "    cpuManagerPolicy: none\n")
	fmt.Fprintf(w, "    kubeReserved: {cpu: \"%d\"}\n", reserve)
	fmt.Fprintf(w, "  so: allocatable cpu = %d online - %d exclusive - %d shared = %d (infra %s)\n",
		topo.Online.Size(), layout.Exclusive.Size(), layout.Shared.Size(), topo.Online.Size()-reserve, orDash(layout.Infra.String()))
	fmt.Fprintf(w, "  the scheduler does not count claims in cpu (KEP-5517 is alpha and off in 1.36), so:\n")
	fmt.Fprintf(w, "    containers with a claim of cpupool-exclusive request a token cpu (e.g. 10m); their CFS quota is lifted\n")
	if !layout.ExclusiveNonIsolcpus.IsEmpty() {
		fmt.Fprintf(w, "    containers with a claim of cpupool-exclusive-non-isolcpus request as much cpu as the claim has CPUs: infra lends them\n")
	}
	fmt.Fprintf(w, "  the Topology Manager does not see claims: align CPUs and devices in the claim (matchAttribute: %s)\n", dracore.AttrNUMANode)
}
