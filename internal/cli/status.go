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
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/pools"
)

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status [--state-file F] [--json]", stderr)
	stateFile := fs.String("state-file", config.Default().StateFile, "the plugin's state file")
	asJSON := fs.Bool("json", false, "print the state as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := plugin.ReadState(*stateFile)
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
		short := id
		if len(short) > 12 {
			short = short[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%dm\t%s\n", c.PodNamespace, c.PodName, c.Container, c.Pool, c.CPUs, orDash(c.Mems), c.MilliCPU, short)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\n%d containers\n", len(st.Containers))
	return nil
}
