package cli

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status [--state-file F] [--json]", stderr)
	stateFile := fs.String("state-file", config.Default().StateFile, "the plugin's state file")
	asJSON := fs.Bool("json", false, "print the state as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := state.ReadState(*stateFile)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, st)
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
	fmt.Fprintln(stdout)
	ids := slices.SortedFunc(maps.Keys(st.Containers), func(x, y string) int {
		a, b := st.Containers[x], st.Containers[y]
		return cmp.Or(strings.Compare(a.PodNamespace+"/"+a.PodName+"/"+a.Container, b.PodNamespace+"/"+b.PodName+"/"+b.Container),
			strings.Compare(x, y)) // the same name twice: by id, so the output is stable
	})
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCONTAINER\tPOOL\tCPUS\tMEMS\tREQUEST\tID")
	for _, id := range ids {
		c := st.Containers[id]
		cpus := c.CPUs
		if c.WithShared {
			cpus += "+" + c.SharedCPUs // the shared pool's, beside its exclusive CPUs
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%dm\t%s\n", c.PodNamespace, c.PodName, c.Container, c.Pool, cpus, orDash(c.Mems), c.MilliCPU, shortID(id))
	}
	tw.Flush()
	if len(st.Held) > 0 {
		printHeld(stdout, st)
	}
	fmt.Fprintf(stdout, "\n%d containers", len(st.Containers))
	if len(st.Held) > 0 {
		fmt.Fprintf(stdout, ", %d stopped holding CPUs", len(st.Held))
	}
	fmt.Fprintln(stdout)
	return nil
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

// printHeld lists the CPUs held for stopped containers: nobody else gets
// them until the pod's sandbox stops.
func printHeld(stdout io.Writer, st *state.State) {
	keys := slices.SortedFunc(maps.Keys(st.Held), func(x, y string) int {
		a, b := st.Held[x], st.Held[y]
		return cmp.Or(strings.Compare(a.PodNamespace+"/"+a.PodName+"/"+a.Container, b.PodNamespace+"/"+b.PodName+"/"+b.Container),
			strings.Compare(x, y))
	})
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(h.PodNamespace), orDash(h.PodName), h.Container, h.Pool, cpus, exit, shortID(h.ContainerID))
	}
	tw.Flush()
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
