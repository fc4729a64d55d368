// Command nri-cpupool-dra is nri-cpupool with the DRA driver (package dra)
// and the Kubernetes client libraries it needs. nri-cpupool runs it in
// its place (the same process, the same arguments) when `run` finds
// dra.enabled set, so that a node without DRA does not pay for those
// libraries' memory (issue 33); its commands are nri-cpupool's.
package main

import (
	"os"

	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/cli"
	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/drarun"
)

func main() {
	cli.NewDriver = drarun.New
	cli.NewPodEvents = drarun.NewPodEvents
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
