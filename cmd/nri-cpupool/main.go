// Command nri-cpupool pins Kubernetes containers to CPU pools from inside
// the container runtime (an NRI plugin), and inspects and simulates that.
package main

import (
	"os"

	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
