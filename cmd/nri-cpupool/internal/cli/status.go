package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status [--config F] [--state-file F] [--sysfs-root D] [--json | --map [--color WHEN]]", stderr)
	cfgPath := configFlag(fs, "the node's configuration file, as run reads it (a missing default file means built-in defaults); its stateFile and sysfsRoot apply")
	stateFile := fs.String("state-file", "", "the plugin's state file (default: the config's stateFile, "+config.Default().StateFile+")")
	asJSON := fs.Bool("json", false, "print the state as JSON")
	asMap := fs.Bool("map", false, "draw the node: each CPU's pool and the container that has it")
	root := fs.String("sysfs-root", "", "directory holding sys/ of the node the state file is from, for the offline CPUs and --map (default: the config's sysfsRoot, /)")
	color := colorAuto
	fs.Var(&color, "color", colorUsage)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *asJSON && *asMap {
		return usageError(fs, "--json and --map: choose one")
	}
	cfg, err := readNodeConfig(*cfgPath, stderr)
	if err != nil {
		return err
	}
	if *stateFile == "" {
		*stateFile = cfg.StateFile
	}
	st, err := readState(*stateFile)
	if err != nil {
		return err
	}
	fresh := freshnessOf(st.Written, *stateFile, cfg.StateFile, cfg.MetricsAddress)
	live := livenessOf(*stateFile)
	if *asJSON {
		return printStatusJSON(stdout, st, *stateFile, fresh, live)
	}
	if *asMap {
		topo, err := sysfs.Discover(sysfsRoot(*root, cfg))
		if err != nil {
			return err
		}
		m, err := stateMap(topo, st)
		if err != nil {
			return fmt.Errorf("%s: %w", *stateFile, err)
		}
		printMap(stdout, m, lookTerminal(color, stdout))
		printStatusMemory(stdout, st)
		writeFreshness(stdout, *stateFile, fresh)
		writeDaemonNotRunning(stdout, *stateFile, live)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tCPUS")
	for _, p := range pools.Names() {
		fmt.Fprintf(tw, "%s\t%s\n", p, orDash(st.Pools[p]))
	}
	tw.Flush()
	if len(st.PowerClasses) > 0 {
		printPowerClasses(stdout, st)
	}
	printStatusMemory(stdout, st)
	fmt.Fprintln(stdout)
	ids := sortedContainers(st)
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCONTAINER\tPOOL\tCPUS\tMEMS\tREQUEST\tID")
	for _, id := range ids {
		c := st.Containers[id]
		cpus := c.CPUs
		if c.WithShared {
			cpus += "+" + c.SharedCPUs // the shared pool's, beside its exclusive CPUs
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%dm\t%s\n", c.PodNamespace, c.PodName, c.Container, c.Pool, cpus, orDash(c.Mems), c.MilliCPU, allocator.ShortID(id))
	}
	tw.Flush()
	if len(st.Held) > 0 {
		printHeld(stdout, st)
	}
	fmt.Fprintf(stdout, "\n%s", plural.Count(len(st.Containers), "container"))
	if len(st.Held) > 0 {
		fmt.Fprintf(stdout, ", %d stopped holding CPUs", len(st.Held))
	}
	fmt.Fprintln(stdout)
	writeFreshness(stdout, *stateFile, fresh)
	writeDaemonNotRunning(stdout, *stateFile, live)
	printRuntime(stdout, *stateFile, live)
	printDRAStatus(stdout, *stateFile)
	printOfflineHeld(stdout, st, sysfsRoot(*root, cfg), *root != "" || sameFile(*stateFile, cfg.StateFile))
	printLastReload(stdout, *stateFile)
	return nil
}

// readState reads the state file for status and audit. A missing one is
// explained by the daemon's status beside it when there is one: a daemon
// that waits for the runtime has not written it yet, which the state
// package's "is the plugin running?" does not know.
func readState(stateFile string) (*state.State, error) {
	st, err := state.ReadState(stateFile)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return st, err
	}
	if why := noStateYet(stateFile); why != "" {
		return nil, fmt.Errorf("no state file %s yet: %s", stateFile, why)
	}
	return nil, err
}

// noStateYet says why a running daemon has not written its state file,
// from its status file and the state directory's lock; "" when the status
// file says nothing of the runtime, or is that of a daemon that is gone.
func noStateYet(stateFile string) string {
	ds, ok, err := state.ReadDaemonStatus(state.DaemonStatusFile(stateFile))
	if err != nil || !ok || ds.Runtime == nil {
		return ""
	}
	r := ds.Runtime
	if held, known := state.Held(stateFile); r.State == state.RuntimeStopped || (known && !held) {
		return "" // no daemon runs: the question stays whether one should
	}
	since := r.Since.UTC().Format(time.RFC3339)
	switch r.State {
	case state.RuntimeWaiting:
		return fmt.Sprintf("the daemon (pid %d) runs and has waited for the runtime since %s: %s. It writes the state file once the runtime has synchronized it; start the runtime (containerd, CRI-O) with NRI enabled, or set nriSocket to its socket", r.PID, since, r.Detail)
	case state.RuntimeRegistered:
		return fmt.Sprintf("the daemon (pid %d) has been registered with the runtime at %s since %s; it writes the state file once the runtime has synchronized it, within moments", r.PID, r.Socket, since)
	}
	return ""
}

// printRuntime prints the daemon's connection to the runtime when it is
// not registered: waiting for the runtime, or stopped. Not when no daemon
// runs: writeDaemonNotRunning says what the last one was.
func printRuntime(stdout io.Writer, stateFile string, live daemonLiveness) {
	if live.NotRunning() {
		return
	}
	ds, ok, err := state.ReadDaemonStatus(state.DaemonStatusFile(stateFile))
	if err != nil || !ok || ds.Runtime == nil || ds.Runtime.State == state.RuntimeRegistered {
		return
	}
	r := ds.Runtime
	fmt.Fprintf(stdout, "Runtime: %s since %s", r.State, r.Since.UTC().Format(time.RFC3339))
	if r.Detail != "" {
		fmt.Fprintf(stdout, ": %s", r.Detail)
	}
	fmt.Fprintln(stdout)
}

// printStatusJSON prints the state file as it is, when it was written
// ("written") and, when the daemon says so, that its state writer fails
// ("stateWriterFailing"); whether a daemon holds the state directory's
// lock ("daemonRunning", absent when the lock cannot tell); and, once the
// daemon has written its status beside it (its runtime connection, its
// last reload), that as "daemon": a dead daemon's last word, when
// daemonRunning is false.
func printStatusJSON(stdout io.Writer, st *state.State, stateFile string, fresh stateFreshness, live daemonLiveness) error {
	out := struct {
		*state.State
		Written            time.Time           `json:"written"`
		StateWriterFailing string              `json:"stateWriterFailing,omitempty"`
		DaemonRunning      *bool               `json:"daemonRunning,omitempty"`
		Daemon             *state.DaemonStatus `json:"daemon,omitempty"`
	}{State: st, Written: fresh.Written, StateWriterFailing: fresh.WriterFailing, DaemonRunning: live.JSON()}
	if ds, ok, err := state.ReadDaemonStatus(state.DaemonStatusFile(stateFile)); err == nil && ok {
		out.Daemon = &ds
	}
	return printJSON(stdout, out)
}

// printLastReload prints the daemon's last config reload: when, what asked
// for it, its result and, if it was not applied, why.
func printLastReload(stdout io.Writer, stateFile string) {
	ds, ok, err := state.ReadDaemonStatus(state.DaemonStatusFile(stateFile))
	switch {
	case err != nil:
		fmt.Fprintf(stdout, "Last reload: unknown: %v\n", err)
		return
	case !ok || ds.LastReload == nil:
		return
	}
	r := ds.LastReload
	fmt.Fprintf(stdout, "Last reload: %s at %s (%s)", r.Result, r.Time.UTC().Format(time.RFC3339), r.Source)
	if r.DurationMS > 0 {
		// From its trigger until applied (the members' updates answered)
		// or decided.
		fmt.Fprintf(stdout, " in %.1f ms", r.DurationMS)
		if r.InForceMS > 0 {
			// The plugin's own part: until the new pools were in force
			// and the members' updates sent.
			fmt.Fprintf(stdout, " (in force after %.1f ms)", r.InForceMS)
		}
	}
	if r.Reason != "" {
		fmt.Fprintf(stdout, ": %s", r.Reason)
	}
	fmt.Fprintln(stdout)
}

// printOfflineHeld lists the CPUs containers and holds keep that the
// kernel has taken offline (CPU hotplug), read from the node now: the
// state keeps them as the containers' own. ofNode says that root is the
// state's node (--sysfs-root names it, or the state file is the config's
// own): a held CPU that is not online is then offline even when the node
// no longer has it (hot-removed, not present), as audit and the daemon's
// metrics count it. Otherwise the state may be another node's, whose held
// CPUs this one may lack, and only present CPUs that are not online are.
func printOfflineHeld(stdout io.Writer, st *state.State, root string, ofNode bool) {
	type entry struct {
		who  string
		cpus cpuset.CPUSet
	}
	var holders []entry
	held := cpuset.New()
	add := func(c state.ContainerState, note string) {
		cpus, err := cpuset.Parse(c.CPUs)
		if err != nil || !pools.IsExclusive(c.Pool) {
			return
		}
		reserved, _ := cpuset.Parse(c.Reserved)
		cpus = cpus.Union(reserved)
		holders = append(holders, entry{containerName(c) + note, cpus})
		held = held.Union(cpus)
	}
	for _, id := range sortedContainers(st) {
		add(st.Containers[id], "")
	}
	for _, k := range sortedHeld(st) {
		add(st.Held[k].ContainerState, " (stopped, held)")
	}
	if !ofNode {
		held = cpuset.New()
	}
	offline := offlineCPUs(root, held)
	if offline.IsEmpty() {
		return
	}
	var out []entry
	for _, h := range holders {
		if off := h.cpus.Intersection(offline); !off.IsEmpty() {
			out = append(out, entry{h.who, off})
		}
	}
	fmt.Fprintf(stdout, "Offline CPUs: %s\n", offline)
	for _, e := range out {
		fmt.Fprintf(stdout, "  %s of %s %s offline: the kernel took %s from its cpuset; %s its own\n", plural.CPUs(e.cpus), e.who, plural.Verb(e.cpus.Size(), "is", "are"),
			plural.Verb(e.cpus.Size(), "it", "them"), plural.Verb(e.cpus.Size(), "it stays", "they stay"))
	}
}

// offlineCPUs are the CPUs of the node below root that are not online:
// the present ones, and those of held that are not (hot-removed); none
// when it cannot tell which are online.
func offlineCPUs(root string, held cpuset.CPUSet) cpuset.CPUSet {
	read := func(name string) (cpuset.CPUSet, bool) {
		data, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu", name))
		if err != nil {
			return cpuset.New(), false
		}
		set, err := cpulist.Parse(string(data))
		return set, err == nil
	}
	online, ok := read("online")
	if !ok {
		return cpuset.New()
	}
	offline := held.Difference(online)
	if present, ok := read("present"); ok {
		offline = offline.Union(present.Difference(online))
	}
	return offline
}

// sameFile tells whether paths a and b name one file: the same path once
// cleaned, or, when both exist, the same inode.
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}

// printDRAStatus prints the DRA driver's state, which the driver writes
// next to the state file when dra.enabled; nothing when it is off. The
// driver's state says nothing about pinning, which runs whatever it is.
func printDRAStatus(stdout io.Writer, stateFile string) {
	s, ok, err := dracore.ReadStatus(dracore.StatusFile(stateFile))
	switch {
	case err != nil:
		fmt.Fprintf(stdout, "DRA driver: unknown: %v\n", err)
		return
	case !ok:
		return
	}
	fmt.Fprintf(stdout, "DRA driver: %s since %s", s.State, s.Since.UTC().Format(time.RFC3339))
	if s.Detail != "" {
		fmt.Fprintf(stdout, ": %s", s.Detail)
	}
	fmt.Fprintln(stdout)
}

// printStatusMemory prints the NUMA nodes' memory the plugin counted
// when it last wrote the file.
func printStatusMemory(stdout io.Writer, st *state.State) {
	if len(st.NUMAMemory) == 0 {
		return
	}
	fmt.Fprintln(stdout)
	printNUMAMemory(stdout, "NUMA MEMORY", st.NUMAMemory)
}

// printPowerClasses lists each power class's CPUs (every CPU that has
// one: its pool's, or its exclusive container's).
func printPowerClasses(stdout io.Writer, st *state.State) {
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POWER CLASS\tCPUS")
	for _, class := range slices.Sorted(maps.Keys(st.PowerClasses)) {
		fmt.Fprintf(tw, "%s\t%s\n", class, st.PowerClasses[class])
	}
	tw.Flush()
}

// stateMap is what status --map draws: the pools and owners the state
// file remembers, on the node's topology.
func stateMap(topo *sysfs.Topology, st *state.State) (nodeMap, error) {
	m := nodeMap{topo: topo, pools: map[string]cpuset.CPUSet{}, showOwners: true}
	for name, list := range st.Pools {
		cpus, err := cpuset.Parse(list)
		if err != nil {
			return m, fmt.Errorf("pools.%s %q: %w", name, list, err)
		}
		m.pools[name] = cpus
	}
	held, idle, irqOff, partitioned := cpuset.New(), cpuset.New(), cpuset.New(), cpuset.New()
	owner := func(c state.ContainerState, what string) (mapOwner, error) {
		cpus, err := cpuset.Parse(c.CPUs)
		if err != nil {
			return mapOwner{}, fmt.Errorf("%s.cpus %q: %w", what, c.CPUs, err)
		}
		reserved, err := cpuset.Parse(c.Reserved)
		if err != nil {
			return mapOwner{}, fmt.Errorf("%s.reserved %q: %w", what, c.Reserved, err)
		}
		idle = idle.Union(reserved)
		if c.IsolateIRQs {
			irqOff = irqOff.Union(cpus).Union(reserved)
		}
		if c.IsolatedPartition {
			partitioned = partitioned.Union(cpus)
		}
		return mapOwner{name: containerName(c), pool: c.Pool, cpus: cpus.Union(reserved)}, nil
	}
	for _, id := range sortedContainers(st) {
		o, err := owner(st.Containers[id], "containers."+id)
		if err != nil {
			return m, err
		}
		m.owners = append(m.owners, o)
	}
	for _, k := range sortedHeld(st) {
		h := st.Held[k]
		o, err := owner(h.ContainerState, "held."+k)
		if err != nil {
			return m, err
		}
		o.held = true
		if h.ExitCode != nil {
			o.note = fmt.Sprintf("exit %d", *h.ExitCode)
		}
		held = held.Union(o.cpus)
		m.owners = append(m.owners, o)
	}
	m.marks = append(nodeMarks(topo), markedCPUs{markHeld, held}, markedCPUs{markIdle, idle},
		markedCPUs{markIRQsOff, irqOff}, markedCPUs{markPartition, partitioned})
	return m, nil
}

// printHeld lists the CPUs held for stopped containers: nobody else gets
// them until the pod's sandbox stops.
func printHeld(stdout io.Writer, st *state.State) {
	keys := sortedHeld(st)
	fmt.Fprintln(stdout, "\nHELD FOR STOPPED CONTAINERS (until the pod's sandbox stops)")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCONTAINER\tPOOL\tCPUS\tEXIT\tID")
	for _, k := range keys {
		h := st.Held[k]
		cpus := h.CPUs
		if h.Reserved != "" {
			cpus += " (+" + h.Reserved + " idle)"
		}
		exit := "-"
		if h.ExitCode != nil {
			exit = fmt.Sprint(*h.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(h.PodNamespace), orDash(h.PodName), h.Container, h.Pool, cpus, exit, allocator.ShortID(h.ContainerID))
	}
	tw.Flush()
}

// sortedContainers are the containers' ids by namespace, pod and container
// name; the same name twice by id, so that the output is stable.
func sortedContainers(st *state.State) []string {
	return slices.SortedFunc(maps.Keys(st.Containers), func(x, y string) int {
		return cmp.Or(strings.Compare(containerName(st.Containers[x]), containerName(st.Containers[y])), strings.Compare(x, y))
	})
}

// sortedHeld are the holds' keys by namespace, pod and container name.
func sortedHeld(st *state.State) []string {
	return slices.SortedFunc(maps.Keys(st.Held), func(x, y string) int {
		return cmp.Or(strings.Compare(containerName(st.Held[x].ContainerState), containerName(st.Held[y].ContainerState)), strings.Compare(x, y))
	})
}

// containerName is how status names a container: namespace/pod/container.
func containerName(c state.ContainerState) string {
	return c.PodNamespace + "/" + c.PodName + "/" + c.Container
}
