package simulate

import (
	"strings"
	"testing"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// FuzzRequests runs any requests file through the simulator: refused or
// replayed, never a panic.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{
		"steps:\n  - create: {pod: a, container: b, cpus: \"2\", annotations: {pool.cpupool.dev: exclusive}}\n  - remove: {pod: a}\n",
		"steps:\n  - create: {pod: a, container: b, cpus: \"9223372036854775807\", annotations: {pool.cpupool.dev: exclusive}}\n",
		"steps:\n  - create: {pod: a, container: b, cpus: \"1e300\", annotations: {pool.cpupool.dev: exclusive-non-isolcpus}}\n",
		"steps:\n  - create: {pod: a, container: b, cpus: \"1\", annotations: {pool.cpupool.dev: exclusive, numa.cpupool.dev: \"0-3000000\"}}\n",
		"steps:\n  - create: {pod: a, container: b, cpus: \"1\", devices: [/dev/vfio/../../sys], annotations: {pool.cpupool.dev: exclusive, hide-hyperthreads.cpupool.dev: \"true\"}}\n",
		"steps:\n  - create: {pod: a, container: b, cpus: \"1\", memory: 1Gi, hugepages-2Mi: 64Mi, hugepages-1Gi: 1Gi, annotations: {pool.cpupool.dev: exclusive}}\n  - resize: {pod: a, container: b, cpus: \"2\"}\n",
		"steps:\n  - create: {pod: a, container: b, cpus: \"1\", memory: 1e30, hugepages-4Ki: 9223372036854775807, annotations: {pool.cpupool.dev: exclusive}}\n",
	} {
		f.Add([]byte(s))
	}
	root := fixture.Root(f, "desktop-8c16t")
	topo, err := sysfs.Discover(root)
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := config.Parse(strings.NewReader(`isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
`), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz.yaml")
		if err != nil || len(file.Steps) > 200 {
			return
		}
		r, err := NewRunner(topo, cfg, root)
		if err != nil {
			t.Fatal(err)
		}
		r.Run(file)
	})
}
