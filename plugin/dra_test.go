package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/pools"
)

// xeonDRA is the 2-socket Xeon (even CPUs on NUMA node 0, odd on node 1)
// with the DRA driver on.
var xeonDRA = testNode{fixture: "xeon-2s-interleaved", config: xeon.config + "dra: {enabled: true}\n"}

// draNode is a plugin with its DRA driver, as `run` wires them.
type draNode struct {
	*runningPlugin
	f      *fakeRuntime
	driver *dra.Driver
	cdi    string
}

func startDRA(t testing.TB, f *fakeRuntime) *draNode { return startDRAOn(t, f, xeonDRA) }

func startDRAOn(t testing.TB, f *fakeRuntime, node testNode) *draNode {
	t.Helper()
	n := &draNode{f: f, cdi: filepath.Join(f.dir, "cdi")}
	n.runningPlugin = startPluginWith(t, f, node, statePath(f), func(rp *runningPlugin) {
		d, err := dra.New(rp.p, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: rp.p.log})
		require.NoError(t, err)
		rp.p.UseClaims(d)
		n.driver = d
	})
	return n
}

// stop ends the plugin as a kill -9 at a quiet moment would (see
// runningPlugin.stop): the claims file too has caught up, as the driver's
// background writer makes it within moments of each change.
func (n *draNode) stop() {
	if err := n.driver.Flush(); err != nil {
		panic(err)
	}
	n.runningPlugin.stop()
}

// prepare prepares a claim the scheduler allocated: cpus CPUs of the
// exclusive pool on a NUMA node (the default model's device), reserved for
// pods; it returns the environment the claim's CDI spec gives.
func (n *draNode) prepare(t testing.TB, uid string, numa, cpus int, pods ...*api.PodSandbox) []string {
	t.Helper()
	claim := n.claim(uid, numa, cpus, pods...)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	return n.cdiEnv(t, uid)
}

// claim is a claim the scheduler allocated: cpus CPUs of the exclusive
// pool on a NUMA node (the default model's device), reserved for pods.
func (n *draNode) claim(uid string, numa, cpus int, pods ...*api.PodSandbox) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "telco", Name: "claim-" + uid, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "cpus", Driver: dra.DriverName, Pool: "node-a",
				Device: dra.GroupName(pools.Exclusive, numa), ShareID: ptr.To(types.UID("share-" + uid)),
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{dra.CapacityCPUs: *resource.NewQuantity(int64(cpus), resource.DecimalSI)}}}}}}}
	for _, pod := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: types.UID(pod.Uid)})
	}
	return claim
}

// cdiEnv is the environment a claim's CDI spec adds, as the runtime
// applies it.
func (n *draNode) cdiEnv(t testing.TB, uid string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.cdi, "*_"+uid+".json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var spec struct {
		Devices []struct {
			ContainerEdits struct{ Env []string } `json:"containerEdits"`
		} `json:"devices"`
	}
	require.NoError(t, json.Unmarshal(data, &spec))
	var env []string
	for _, d := range spec.Devices {
		env = append(env, d.ContainerEdits.Env...)
	}
	return env
}

func (n *draNode) claimCPUs(t *testing.T, uid string) string {
	t.Helper()
	c, ok := n.driver.Claims()[uid]
	require.True(t, ok)
	return c.Requests["cpus"].CPUs
}

// A container that shows its claim's token runs on exactly the claim's
// CPUs, with its memory on their node and no CFS quota, like a container
// of any exclusive pool; its restart gets them again.
func TestDRAClaimPinsItsContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := n.prepare(t, "uid-1", 1, 4, pod)
	cpus := n.claimCPUs(t, "uid-1")
	assert.Equal(t, "3,5,43,45", cpus, "two whole cores of node 1 (odd CPUs; siblings N and N+40)")

	ctr, resp, err := f.createWithEnv(pod, "fwd", 10, append([]string{"PATH=/bin"}, env...)...)
	require.NoError(t, err)
	assert.Equal(t, cpus, resp.Adjust.Linux.Resources.Cpu.Cpus)
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Mems, "memory on the CPUs' node")
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q, "a 10m CPU request would throttle the claim's CPUs: no quota")
	assert.Equal(t, "exclusive", envOf(resp)[EnvPool])

	// The kubelet restarts the container: the CDI spec gives the same
	// token, the held CPUs come back.
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	_, resp, err = f.createWithEnv(pod, "fwd", 10, env...)
	require.NoError(t, err)
	assert.Equal(t, cpus, resp.Adjust.Linux.Resources.Cpu.Cpus)

	// The status shows it as any exclusive container.
	st := n.savedState(t)
	var found bool
	for _, c := range st.Containers {
		if c.Container == "fwd" {
			found = true
			assert.Equal(t, "exclusive", c.Pool)
			assert.Equal(t, cpus, c.CPUs)
			assert.True(t, c.NoCPUQuota)
		}
	}
	assert.True(t, found)
}

// A claim gives its CPUs to one container: a second container of the pod,
// a container of another pod sharing the claim, a pod the claim is not
// reserved for and a hand-written variable get nothing, and each refusal
// says why.
func TestDRAClaimCannotBeSharedOrForged(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	pod := f.runPod(podSpec{name: "app", namespace: "telco"})
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	// The kubelet prepares the claim for its first pod; a second pod that
	// shares it (a resourceClaimName claim) finds it prepared and calls
	// no Prepare: the driver knows the first pod only.
	env := n.prepare(t, "uid-1", 0, 2, pod)
	_, _, err := f.createWithEnv(pod, "first", 10, env...)
	require.NoError(t, err)

	_, _, err = f.createWithEnv(pod, "second", 10, env...)
	assert.ErrorContains(t, err, "nri-cpupool: container telco/app/second: claim telco/claim-uid-1 request cpus already gives its CPUs to container first")
	_, _, err = f.createWithEnv(other, "c", 10, env...)
	assert.ErrorContains(t, err, "nri-cpupool: container telco/other/c: claim telco/claim-uid-1 request cpus already gives its CPUs to container first of pod "+pod.Uid+"; a request of cpupool.dev gives its CPUs to one container")
	// A request nobody uses yet, in a pod the claim is not reserved for.
	unused := n.prepare(t, "uid-2", 0, 2, pod)
	_, _, err = f.createWithEnv(other, "copied", 10, unused...)
	assert.ErrorContains(t, err, "claim telco/claim-uid-2 is reserved for other pods ("+pod.Uid+"), not for pod telco/other")
	name, _, _ := strings.Cut(env[0], "=")
	_, _, err = f.createWithEnv(other, "forged", 10, name+"=0123456789abcdef0123456789abcdef")
	assert.ErrorContains(t, err, "unknown claim token")
	_, _, err = f.createWithEnv(pod, "twice", 10, append([]string{name + "=x"}, env...)...)
	assert.ErrorContains(t, err, "is set more than once")

	// An annotation cannot ask for the exclusive pools any more.
	ann := f.runPod(podSpec{name: "ann", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	_, _, err = f.createContainer(ann, "c", 2000)
	assert.ErrorContains(t, err, "with the DRA driver on, pool exclusive-non-isolcpus is given only through ResourceClaims; use a claim of DeviceClass cpupool-exclusive-non-isolcpus")

	// A CPU request resize cannot change a claim's CPUs.
	ctr := f.ctrs["ctr-app-first"]
	_, err = f.updateContainer(pod, ctr, 4000)
	assert.ErrorContains(t, err, "resize to 4000m refused: its CPUs 2,42 are its ResourceClaim's")
}

// A resourceClaimName claim used by one pod after another (a rolling
// update): the new pod is scheduled while the old one runs, and the
// kubelet, which finds the claim prepared, calls no Prepare for it. Its
// container is refused while the request is bound to the old pod's
// container, also after that pod is gone: the kubelet unprepares a claim
// only when no pod on the node uses it, and the new pod does. Once it is
// deleted too, the claim is unprepared, and the next pod's Prepare places
// it afresh.
func TestDRAClaimReusedByAnotherPodWaitsForUnprepare(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	old := f.runPod(podSpec{name: "app-1", namespace: "telco"})
	env := n.prepare(t, "uid-1", 0, 2, old)
	ctr, _, err := f.createWithEnv(old, "c", 10, env...)
	require.NoError(t, err)

	surge := f.runPod(podSpec{name: "app-2", namespace: "telco"})
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(old)
	_, _, err = f.createWithEnv(surge, "c", 10, env...)
	assert.ErrorContains(t, err, "claim telco/claim-uid-1 request cpus already gives its CPUs to container c of pod "+old.Uid)

	f.removePod(surge)
	unprep, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-1"}})
	require.NoError(t, err)
	require.NoError(t, unprep["uid-1"])
	next := f.runPod(podSpec{name: "app-3", namespace: "telco"})
	_, _, err = f.createWithEnv(next, "c", 10, n.prepare(t, "uid-1", 0, 2, next)...)
	require.NoError(t, err)
}

// Prepare chooses among the CPUs no container holds, and the slices leave
// out CPUs a container holds after its claim was unprepared (the kubelet
// unprepares when the pod ends, a moment before its container stops).
func TestDRAPrepareAndSlicesFollowTheContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	pod := f.runPod(podSpec{name: "app", namespace: "telco"})
	env := n.prepare(t, "uid-1", 1, 4, pod)
	_, _, err := f.createWithEnv(pod, "c", 10, env...)
	require.NoError(t, err)
	full := n.driver.Offer()

	_, err = n.driver.UnprepareResourceClaims(context.Background(), nil)
	require.NoError(t, err)
	unprep, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-1"}})
	require.NoError(t, err)
	assert.NoError(t, unprep["uid-1"])
	less := n.driver.Offer()
	assert.Equal(t, slotsOf(full, 1)-4, slotsOf(less, 1), "the container still holds 4 CPUs of node 1")

	// A new claim on node 1 does not get them.
	pod2 := f.runPod(podSpec{name: "app2", namespace: "telco"})
	n.prepare(t, "uid-2", 1, 26, pod2) // all of node 1's 30 but the 4 held
	assert.True(t, mustParse(n.claimCPUs(t, "uid-2")).Intersection(mustParse("3,5,43,45")).IsEmpty())

	// The pod ends: its CPUs come back to the offer.
	f.removePod(pod)
	assert.Equal(t, slotsOf(full, 1), slotsOf(n.driver.Offer(), 1))
}

func slotsOf(groups []dra.Group, numa int) int {
	for _, g := range groups {
		if g.Pool == pools.Exclusive && g.NUMA == numa {
			return g.Slots
		}
	}
	return 0
}

// The kubelet unprepares a claim once its pod's containers have ended;
// the CPUs held for them go back then, not at the sandbox's stop, which
// containerd does not send for pods created before its restart (found on
// the cluster suite, after a containerd restart). A pod that still runs a
// container keeps its holds.
func TestDRAUnprepareReleasesTheHoldsOfItsPod(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	pod := f.runPod(podSpec{name: "old", namespace: "telco"})
	env := n.prepare(t, "uid-1", 0, 28, pod) // node 0's exclusive CPUs but 2
	ctr, _, err := f.createWithEnv(pod, "c", 10, env...)
	require.NoError(t, err)
	sidecarEnv := n.prepare(t, "uid-s", 0, 2, pod)
	_, _, err = f.createWithEnv(pod, "sidecar", 10, sidecarEnv...)
	require.NoError(t, err)
	f.stopContainer(ctr)
	unprepare := func(uid string) {
		t.Helper()
		res, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}})
		require.NoError(t, err)
		require.NoError(t, res[types.UID(uid)])
	}
	next := f.runPod(podSpec{name: "next", namespace: "telco"})
	claim := func() error {
		t.Helper()
		res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{n.claim("uid-2", 0, 2, next)})
		require.NoError(t, err)
		return res["uid-2"].Err
	}
	unprepare("uid-1")
	assert.ErrorContains(t, claim(), "pool exclusive has 0 free CPUs on NUMA node 0", "the sidecar runs: the pod keeps its holds")

	f.stopContainer(f.ctrs["ctr-old-sidecar"])
	unprepare("uid-s")
	require.NoError(t, claim(), "no container of the pod runs: its CPUs went back at the Unprepare, no sandbox stop needed")
}

// A binding the claims file lacks (issue 30, defect 7): the driver writes
// bindings in the background, and a kill -9 before that write (or a write
// that failed until the kill) leaves the file with the request unbound
// while its container runs. Synchronize binds it to the running container
// again, so another pod the claim is reserved for that shows the token is
// refused, and the owner keeps its CPUs. With the file gone altogether the
// token is unknown, and refused too.
func TestDRABindingLostToAKillIsMadeAgainAtSynchronize(t *testing.T) {
	for _, file := range []string{"stale", "missing"} {
		t.Run(file, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startDRA(t, f)
			owner := f.runPod(podSpec{name: "owner", namespace: "telco"})
			other := f.runPod(podSpec{name: "other", namespace: "telco"})
			// A resourceClaimName claim both pods were scheduled with
			// before the kubelet prepared it: reserved for both.
			env := first.prepare(t, "uid-1", 1, 2, owner, other)
			ctr, resp, err := f.createWithEnv(owner, "app", 10, env...)
			require.NoError(t, err)
			cpus := resp.Adjust.Linux.Resources.Cpu.Cpus
			require.Equal(t, first.claimCPUs(t, "uid-1"), cpus)
			require.Equal(t, owner.Uid, first.driver.Claims()["uid-1"].Requests["cpus"].PodUID, "bound in memory")
			require.NoError(t, first.p.Flush(), "the state file knows the container")
			claims := dra.ClaimsFile(statePath(f))
			require.Empty(t, claimsOnDisk(t, claims)["uid-1"].Requests["cpus"].PodUID, "the binding never reached the claims file")
			if file == "missing" {
				require.NoError(t, os.Remove(claims))
			}
			first.kill()

			second := startDRA(t, f)
			assert.Equal(t, cpus, f.cpus(ctr), "the owner stays on its CPUs")
			_, _, err = f.createWithEnv(other, "app", 10, env...)
			if file == "missing" {
				assert.ErrorContains(t, err, "unknown claim token")
				return
			}
			assert.ErrorContains(t, err, "claim telco/claim-uid-1 request cpus already gives its CPUs to container app of pod "+owner.Uid)
			r := second.driver.Claims()["uid-1"].Requests["cpus"]
			assert.Equal(t, owner.Uid, r.PodUID, "bound to the owner again")
			assert.Equal(t, "app", r.Container)
			assertEveryCPUAccounted(t, f, second.p)
		})
	}
}

// claimsOnDisk reads the DRA claims file.
func claimsOnDisk(t *testing.T, path string) map[string]*dra.Claim {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		Claims map[string]*dra.Claim `json:"claims"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc.Claims
}
