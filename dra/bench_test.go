package dra

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/pools"
)

// BenchmarkDRAPrepare measures Prepare after the helper fetched the claim,
// in each device model (numaNode, the default, and cpu): the placement of
// 4 CPUs on a NUMA node of the 384-CPU, 8-node fixture (half of each
// node's exclusive CPUs held by 96 other claims), the claims file write
// (on disk, as on a node) and the CDI spec write (in tmpfs, as
// /var/run/cdi). Target: ≤ 1 ms median in each. Each claim is unprepared
// after it is measured, so the node stays half full.
func BenchmarkDRAPrepare(b *testing.B) {
	for _, model := range Models() {
		b.Run("model="+model, func(b *testing.B) { benchmarkPrepare(b, model) })
	}
}

func benchmarkPrepare(b *testing.B, model string) {
	s := static(b, "epyc-2s-384", epycConfig)
	td := newTestDriver(b, s)
	td.model = model
	// /var/run/cdi is a tmpfs; the claims file is on the state disk.
	if shm, err := os.MkdirTemp("/dev/shm", "cdi-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(shm) })
		td.cdi = shm
	}
	td.Driver = td.restart(b)
	// A request of n CPUs as the scheduler allocates it in the model: a
	// share of the node's device, or n slot devices from first.
	claim := func(uid string, numa, first, n int) *resourceapi.ResourceClaim {
		if model == ModelCPU {
			return allocatedClaim(uid, uid, slots{"cpus": slotsOn(pools.Exclusive, numa, first, n)}, "pod-"+uid)
		}
		return shareClaim(uid, uid, pools.Exclusive, numa, n, "pod-"+uid)
	}
	ctx := context.Background()
	// Half of every node taken by 2-CPU claims.
	for node := range 8 {
		for i := range 12 {
			uid := "fill-" + strconv.Itoa(node) + "-" + strconv.Itoa(i)
			res, err := td.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim(uid, node, 2*i, 2)})
			if err != nil || res[types.UID(uid)].Err != nil {
				b.Fatalf("fill: %v %v", err, res[types.UID(uid)].Err)
			}
		}
	}
	claims := make([]*resourceapi.ResourceClaim, 64)
	for i := range claims {
		claims[i] = claim("bench-"+strconv.Itoa(i), i%8, 30, 4)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := claims[i%len(claims)]
		start := time.Now()
		res, err := td.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
		lat = append(lat, time.Since(start))
		if err != nil || res[c.UID].Err != nil {
			b.Fatalf("prepare: %v %v", err, res[c.UID].Err)
		}
		b.StopTimer()
		unprepare(b, td.Driver, string(c.UID))
		b.StartTimer()
	}
	b.StopTimer()
	benchutil.ReportLatency(b, lat)
}
