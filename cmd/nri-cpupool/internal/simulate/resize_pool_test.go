package simulate

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// The daemon judges a resized container's annotations against the pool it
// runs in (plugin TestResizeJudgesAnnotationsAgainstTheRunningPool:
// guaranteedExclusive, numa.cpupool.dev 0, 2 -> 2.5 CPUs grows to 3).
// simulate's resize step is documented as the daemon's, so it must grow the
// container too, not refuse it because a new container of 2.5 CPUs would
// go to infra.
func TestSimulateResizeJudgesAnnotationsAgainstTheRunningPool(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	topo, err := sysfs.Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(strings.NewReader("isolatedCPUs: \"4-7,12-15\"\nguaranteedExclusive: true\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	file, err := Parse([]byte("steps:\n  - create: {namespace: telco, pod: db, container: db, cpus: \"2\", qos: guaranteed, annotations: {numa.cpupool.dev: \"0\"}}\n  - resize: {namespace: telco, pod: db, container: db, cpus: \"2.5\"}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(topo, cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	res := r.Run(file)
	if res[0].Error != "" || res[0].Pool != "exclusive" {
		t.Fatalf("create: %+v", res[0])
	}
	if res[1].Error != "" {
		t.Fatalf("simulate refuses the resize the daemon makes: %s", res[1].Error)
	}
	cpus, err := cpuset.Parse(res[1].CPUs)
	if err != nil {
		t.Fatal(err)
	}
	if res[1].Pool != "exclusive" || cpus.Size() != 3 {
		t.Errorf("resize to 2.5 CPUs: pool %s, CPUs %s; want exclusive, 3 CPUs", res[1].Pool, res[1].CPUs)
	}
}
