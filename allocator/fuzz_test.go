package allocator

import (
	"errors"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// FuzzAnnotations drives annotations through the policy into the allocator:
// any annotation set is refused or placed inside its pool; never a panic.
func FuzzAnnotations(f *testing.F) {
	f.Add("exclusive", "0", "", "true", "", "", "telco", int64(2000))
	f.Add("exclusive", "0-3000000", "", "", "", "", "telco", int64(1000))
	f.Add("exclusive", "0-9223372036854775807", "", "", "", "", "telco", int64(1000))
	f.Add("exclusive-non-isolcpus", "", "/sys/class/net/eth0", "", "true", "", "telco", int64(9223372036854775807))
	f.Add("shared", "1", "", "", "", "", "web", int64(0))
	f.Add("exclusive", "0,1", "/sys/class/net/eth0,/nope", "false", "false", "true", "telco", int64(-5))
	topo := topology(f, "kubelet-dual-socket-ht")
	cfg := parseConfig(f, `isolatedCPUs: "2-11"
pools:
  exclusive: {cpus: "4-11"}
  shared: {cpus: "2-3"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`)
	layout, problems := BuildLayout(topo, cfg)
	if problems.HasErrors() {
		f.Fatal(problems.Errors())
	}
	policy := NewPolicy(cfg, topo)
	resolve := func(path string) (int, error) {
		if path == "/sys/class/net/eth0" {
			return 1, nil
		}
		return -1, errors.New("no such device")
	}
	f.Fuzz(func(t *testing.T, pool, numa, device, ht, full, dist, ns string, milli int64) {
		ann := map[string]string{}
		for k, v := range map[string]string{AnnotationPool: pool, AnnotationNUMA: numa, AnnotationDevice: device,
			AnnotationHideHyperthreads: ht, AnnotationFullPCPUsOnly: full, AnnotationDistributeAcrossNUMA: dist} {
			if v != "" {
				ann[k] = v
			}
		}
		a := New(topo, layout, cfg.PinMemory)
		// Someone already holds CPUs, so that placement has to work around them.
		if _, err := a.Allocate(Request{ID: "other", Pod: PodRef{UID: "o"}, Container: "c", Pool: pools.Exclusive, MilliCPU: 3000,
			NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()}); err != nil {
			t.Fatal(err)
		}
		req, err := policy.Request(Container{ID: "x", Name: "c", Pod: PodRef{Namespace: ns, Name: "p", UID: "u"}, MilliCPU: milli,
			Annotations: ann, DeviceNUMA: cpuset.New()}, resolve)
		if err != nil {
			if len(err.Error()) > 1200 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		res, err := a.Allocate(req)
		if err != nil {
			return
		}
		got := res.Assignment
		if !got.CPUs.IsSubsetOf(layout.Pool(got.Pool)) && pools.IsExclusive(got.Pool) {
			t.Fatalf("%s outside pool %s", got.CPUs, got.Pool)
		}
		other, _ := a.Get("other")
		if pools.IsExclusive(got.Pool) && !got.Held().Intersection(other.Held()).IsEmpty() {
			t.Fatalf("%s overlaps %s", got.Held(), other.Held())
		}
		if !req.NUMANodes.IsEmpty() {
			for _, c := range got.CPUs.List() {
				if !req.NUMANodes.Contains(topo.CPUs[c].NUMA) {
					t.Fatalf("CPU %d outside NUMA nodes %s", c, req.NUMANodes)
				}
			}
		}
	})
}
