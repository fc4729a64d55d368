// Command mksysfs materializes the sysfs fixtures described by
// testdata/topologies/*.yaml into directories usable as --sysfs-root.
//
//	go run ./tools/mksysfs -out testdata/sysfs testdata/topologies/*.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

func main() {
	out := flag.String("out", "testdata/sysfs", "directory to create one fixture root per spec in")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mksysfs -out DIR SPEC.yaml...")
		os.Exit(2)
	}
	for _, spec := range flag.Args() {
		name := strings.TrimSuffix(filepath.Base(spec), filepath.Ext(spec))
		s, err := fixture.LoadSpec(spec)
		if err == nil {
			dst := filepath.Join(*out, name)
			if err = os.RemoveAll(dst); err == nil {
				err = s.Write(dst)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "mksysfs: %s: %v\n", spec, err)
			os.Exit(1)
		}
	}
}
