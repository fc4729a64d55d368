package plugin

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/pools"
)

// heldByARunningContainer runs an exclusive container (annotated, from
// before the driver or the device plugin was on) under a first daemon,
// which then stops: the next daemon learns of it only from the runtime's
// Synchronize. It returns the container and its CPUs.
func heldByARunningContainer(t *testing.T, f *fakeRuntime) (*api.Container, string) {
	t.Helper()
	first := startPlugin(t, f, xeon, statePath(f))
	old := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, resp, err := f.createContainer(old, "app", 2000)
	require.NoError(t, err)
	held := resp.Adjust.Linux.Resources.Cpu.Cpus
	require.Equal(t, 2, mustParse(held).Size())
	first.stop()
	return ctr, held
}

// slotsOn is the exclusive pool's free slots the driver offers on a NUMA
// node.
func slotsOn(d *dra.Driver, numa int) int {
	for _, g := range d.Offer() {
		if g.Pool == pools.Exclusive && g.NUMA == numa {
			return g.Slots
		}
	}
	return 0
}

// publishedOnce runs the driver's publishing loop for its first publish
// only (its context is over before it starts) and returns what it
// published, nil for nothing.
func publishedOnce(d *dra.Driver) []resourceslice.DriverResources {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out []resourceslice.DriverResources
	d.Run(ctx, func(r resourceslice.DriverResources) error {
		out = append(out, r)
		return nil
	})
	return out
}

// TestDRAPrepareWaitsForSynchronize: the DRA driver serves the kubelet
// from the daemon's start, but the plugin knows the running containers
// only once the runtime has synchronized. Until then a Prepare is refused
// (the kubelet retries) and no slice is published: over an allocator that
// holds nothing, the claim could be given the CPUs an exclusive container
// runs on, and the offer would count them free. Once synchronized, the
// claim is prepared beside that container.
func TestDRAPrepareWaitsForSynchronize(t *testing.T) {
	f := newFakeRuntime(t, false)
	ctr, heldList := heldByARunningContainer(t, f)
	held := mustParse(heldList)
	n := &draNode{f: f, cdi: f.dir + "/cdi"}
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	numa := -1
	n.runningPlugin = startPluginWith(t, f, xeonDRA, statePath(f), func(rp *runningPlugin) {
		d, err := dra.New(rp.p, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: rp.p.log})
		require.NoError(t, err)
		rp.p.UseClaims(d)
		n.driver = d
		c, _ := rp.p.topo.CPU(held.List()[0])
		numa = c.NUMA
		// The kubelet prepares a claim before the runtime synchronized,
		// for every slot it would have seen free.
		claim := n.claim("uid-1", numa, slotsOn(d, numa), other)
		res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
		require.NoError(t, err)
		if err := res[claim.UID].Err; !errors.Is(err, dra.ErrNotSynced) {
			t.Errorf("a Prepare before the runtime's Synchronize: got %v, want it refused (%v)", err, dra.ErrNotSynced)
		}
		if got := publishedOnce(d); len(got) > 0 {
			t.Errorf("slices published before the runtime's Synchronize: %d", len(got))
		}
	})
	require.Equal(t, heldList, f.cpus(ctr), "the old container runs where it ran")
	require.NotEmpty(t, publishedOnce(n.driver), "published once synchronized")

	// The kubelet retries, now with the slots the synchronized offer has.
	free := slotsOn(n.driver, numa)
	require.Positive(t, free)
	env := n.prepare(t, "uid-1", numa, free, other)
	got := mustParse(n.claimCPUs(t, "uid-1"))
	if !got.Intersection(held).IsEmpty() {
		t.Errorf("claim prepared with CPUs %s, of which %s are held by the running container telco/old/app", got, got.Intersection(held))
	}
	_, _, err := f.createWithEnv(other, "app", 10, env...)
	require.NoError(t, err, "the claim's container starts beside the old one")
}

// TestGrantWaitsForSynchronize: the device plugin's side. Until the
// runtime's first Synchronize every exclusive CPU is advertised unhealthy
// (the kubelet allocates none; the CPUs of recorded grants excepted, see
// TestPresyncKeepsGrantedCPUsHealthy) and Allocate is refused: a CPU an
// annotated exclusive container runs on would look free. Once
// synchronized, only that container's CPUs stay unhealthy.
func TestGrantWaitsForSynchronize(t *testing.T) {
	f := newFakeRuntime(t, false)
	ctr, heldList := heldByARunningContainer(t, f)
	held := mustParse(heldList)
	var ids []string
	for _, c := range held.List() {
		ids = append(ids, strconv.Itoa(c))
	}
	var healthyBefore int
	var grantErr error
	second := startPluginWith(t, f, xeon, statePath(f), func(rp *runningPlugin) {
		for _, d := range rp.p.Devices() {
			if d.Healthy {
				healthyBefore++
			}
		}
		_, grantErr = rp.p.Grant(ids)
	})
	require.Equal(t, heldList, f.cpus(ctr), "the old container runs where it ran")
	if healthyBefore > 0 {
		t.Errorf("before Synchronize %d CPUs were advertised healthy, among them %s, which container telco/old/app runs on", healthyBefore, held)
	}
	if grantErr == nil {
		t.Errorf("Allocate before Synchronize granted CPUs %s, which container telco/old/app runs on", held)
	}
	devs := second.p.Devices()
	require.NotEmpty(t, devs)
	for _, d := range devs {
		c, _ := strconv.Atoi(d.ID)
		if d.Healthy == held.Contains(c) {
			t.Errorf("after Synchronize CPU %d is advertised healthy=%v; only telco/old/app's CPUs %s are not free", c, d.Healthy, held)
		}
	}
}
