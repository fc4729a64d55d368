package dra

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/pools"
)

// The 384-CPU node: 8 NUMA nodes of 48 CPUs, 3 L3 groups of 8 cores each.
const epycConfig = `isolatedCPUs: "4-191,196-383"
pools:
  exclusive-non-isolcpus: {enabled: true}`

func prepare(t testing.TB, d *Driver, claims ...*resourceapi.ResourceClaim) map[types.UID]kubeletplugin.PrepareResult {
	t.Helper()
	out, err := d.PrepareResourceClaims(context.Background(), claims)
	require.NoError(t, err)
	require.Len(t, out, len(claims))
	return out
}

func unprepare(t testing.TB, d *Driver, uids ...string) {
	t.Helper()
	var refs []kubeletplugin.NamespacedObject
	for _, uid := range uids {
		refs = append(refs, kubeletplugin.NamespacedObject{UID: types.UID(uid)})
	}
	out, err := d.UnprepareResourceClaims(context.Background(), refs)
	require.NoError(t, err)
	for uid, err := range out {
		require.NoError(t, err, uid)
	}
}

// cdiEnv reads the environment a claim's CDI spec gives its devices, by
// CDI device id.
func cdiEnv(t *testing.T, dir, uid string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(cdiFile(dir, uid))
	require.NoError(t, err)
	var spec cdiSpec
	require.NoError(t, json.Unmarshal(data, &spec))
	require.Equal(t, CDIKind, spec.Kind)
	out := map[string][]string{}
	for _, d := range spec.Devices {
		out[spec.Kind+"="+d.Name] = d.ContainerEdits.Env
	}
	return out
}

// cpusOf returns the CPUs of a prepared claim's request.
func cpusOf(t *testing.T, d *Driver, uid, request string) cpuset.CPUSet {
	t.Helper()
	c, ok := d.Claims()[uid]
	require.True(t, ok, "claim %s is prepared", uid)
	r, ok := c.Requests[request]
	require.True(t, ok, "claim %s has request %s", uid, request)
	return r.CPUSet()
}

func TestPrepareChoosesCPUsWithinTheAllocationByThePlacementRules(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	topo, _ := s.Layout()

	// 4 slots on NUMA node 3, from the middle of its slots: slots say
	// nothing of which CPUs.
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	res := prepare(t, d.Driver, claim)["uid-1"]
	require.NoError(t, res.Err)

	cpus := cpusOf(t, d.Driver, "uid-1", "cpus")
	assert.Equal(t, 4, cpus.Size())
	assert.Equal(t, "[3]", numaOf(topo, cpus), "on the node the scheduler chose")
	// Whole cores: 2 cores, both threads of each (siblings N and N+192).
	assert.Equal(t, "72-73,264-265", cpus.String(), "two whole cores of one L3 group, lowest first")

	// The kubelet gets every allocated device, and the request's CDI
	// device on the first one only, so the variable is set once.
	require.Len(t, res.Devices, 4)
	id := CDIDeviceID("uid-1", "cpus")
	assert.Equal(t, "cpupool.dev/claim=uid-1-cpus", id)
	assert.Equal(t, []string{id}, res.Devices[0].CDIDeviceIDs)
	for i, dev := range res.Devices {
		assert.Equal(t, testNode, dev.PoolName)
		assert.Equal(t, claim.Status.Allocation.Devices.Results[i].Device, dev.DeviceName)
		assert.Equal(t, []string{"cpus"}, dev.Requests)
		if i > 0 {
			assert.Empty(t, dev.CDIDeviceIDs)
		}
	}

	// The CDI spec carries a token, not the CPUs.
	env := cdiEnv(t, d.cdi, "uid-1")
	require.Len(t, env[id], 1)
	name, token, _ := strings.Cut(env[id][0], "=")
	assert.Equal(t, "CPUPOOL_CLAIM_uid_1_cpus", name)
	assert.Len(t, token, 32)
	assert.NotContains(t, env[id][0], cpus.String())
	info, err := os.Stat(cdiFile(d.cdi, "uid-1"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "tokens are for the runtime only")

	// Another claim on the same node gets other CPUs, next to the first
	// (best fit: the fullest L3 group that fits).
	prepare(t, d.Driver, allocatedClaim("uid-2", "more", slots{"cpus": slotsOn(pools.Exclusive, 3, 0, 2)}, "pod-2"))
	assert.Equal(t, "74,266", cpusOf(t, d.Driver, "uid-2", "cpus").String())
}

// A request the scheduler spread over two NUMA nodes gets that many CPUs
// on each: the scheduler counted them there.
func TestPrepareKeepsTheSchedulersNUMASplit(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	topo, _ := s.Layout()
	alloc := append(slotsOn(pools.Exclusive, 1, 0, 3), slotsOn(pools.Exclusive, 6, 0, 2)...)
	require.NoError(t, prepare(t, d.Driver, allocatedClaim("uid-1", "split", slots{"cpus": alloc}, "pod-1"))["uid-1"].Err)
	cpus := cpusOf(t, d.Driver, "uid-1", "cpus")
	onNode := func(n int) int { return cpus.Intersection(mustNode(t, topo, n)).Size() }
	assert.Equal(t, 3, onNode(1))
	assert.Equal(t, 2, onNode(6))
}

// Requests of one claim are placed one after the other, never on the same
// CPUs; each has its own token and CDI device.
func TestPrepareClaimWithTwoRequests(t *testing.T) {
	d := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "two", slots{
		"a": slotsOn(pools.Exclusive, 2, 0, 2),
		"b": slotsOn(pools.ExclusiveNonIsolcpus, 0, 0, 2),
	}, "pod-1")
	res := prepare(t, d.Driver, claim)["uid-1"]
	require.NoError(t, res.Err)
	a, b := cpusOf(t, d.Driver, "uid-1", "a"), cpusOf(t, d.Driver, "uid-1", "b")
	assert.True(t, a.Intersection(b).IsEmpty())
	assert.Equal(t, "0,192", b.String(), "exclusive-non-isolcpus lends infra's CPUs (0-3,192-195), a whole core")
	env := cdiEnv(t, d.cdi, "uid-1")
	assert.Len(t, env, 2)
	assert.NotEqual(t, env[CDIDeviceID("uid-1", "a")], env[CDIDeviceID("uid-1", "b")])
}

func TestPrepareIsIdempotent(t *testing.T) {
	d := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 5, 0, 6)}, "pod-1")
	first := prepare(t, d.Driver, claim)["uid-1"]
	before := d.Claims()["uid-1"]
	envBefore := cdiEnv(t, d.cdi, "uid-1")

	again := prepare(t, d.Driver, claim)["uid-1"]
	assert.Equal(t, first, again)
	assert.Equal(t, before, d.Claims()["uid-1"], "same CPUs, same token")
	assert.Equal(t, envBefore, cdiEnv(t, d.cdi, "uid-1"))

	// The kubelet prepares a claim once on a node: for a pod that joins a
	// prepared claim (a resourceClaimName claim) it calls no Prepare, and
	// that pod's containers are refused (TestBindOfAClaimSharedByTwoPods). A
	// Prepare does come again when the kubelet retries (it prepares all of
	// a pod's claims again when one of them failed), or when a second pod
	// of a shared claim starts while the first pod's Prepare is under way;
	// it carries reservedFor as it is then. The pods it lists are
	// recorded; the CPUs and tokens stay.
	shared := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 5, 0, 6)}, "pod-1", "pod-2")
	assert.Equal(t, first, prepare(t, d.Driver, shared)["uid-1"])
	assert.Equal(t, []string{"pod-1", "pod-2"}, d.Claims()["uid-1"].Pods)
	assert.Equal(t, before.Requests, d.Claims()["uid-1"].Requests)
	assert.Equal(t, envBefore, cdiEnv(t, d.cdi, "uid-1"))
}

// A daemon restarted with other pools remembers its claims. At the next
// Prepare, a request whose CPUs its pool no longer has is placed anew, as
// for a reallocation: new CPUs, a new token, no container yet (kept, its
// container would be refused at every creation, outside its pool as now
// configured). A request whose CPUs still fit keeps them and its token.
func TestPrepareReplacesARequestItsPoolNoLongerHas(t *testing.T) {
	td := newTestDriver(t, static(t, "xeon-2s-interleaved", ""))
	moved := allocatedClaim("uid-1", "moved", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	stays := allocatedClaim("uid-2", "stays", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 2)}, "pod-2")
	first := prepare(t, td.Driver, moved, stays)
	old := cpusOf(t, td.Driver, "uid-1", "cpus")
	oldEnv := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	ctr := Container{PodUID: "pod-1", Namespace: "ns", Pod: "p", Name: "c"}
	_, _, err := td.Bind(oldEnv, ctr)
	require.NoError(t, err)
	require.NoError(t, td.save())
	staysBefore := td.Claims()["uid-2"]

	// The new config gives the first claim's CPUs to the shared pool.
	td.pools = static(t, "xeon-2s-interleaved", `pools: {shared: {cpus: "`+old.String()+`"}}`)
	restarted := td.restart(t)
	require.Equal(t, old, cpusOf(t, restarted, "uid-1", "cpus"), "remembered until the kubelet prepares it")
	res := prepare(t, restarted, moved, stays)
	require.NoError(t, res["uid-1"].Err)
	topo, layout := td.pools.Layout()
	now := cpusOf(t, restarted, "uid-1", "cpus")
	assert.Equal(t, 4, now.Size())
	assert.True(t, now.IsSubsetOf(layout.Pool(pools.Exclusive)), "%s in the exclusive pool as now configured", now)
	assert.Equal(t, "[1]", numaOf(topo, now), "on the node the scheduler chose")
	assert.Empty(t, restarted.Claims()["uid-1"].Requests["cpus"].PodUID, "no container yet")
	newEnv := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	assert.NotEqual(t, oldEnv, newEnv, "a new token in the CDI spec")
	_, _, err = restarted.Bind(oldEnv, ctr)
	assert.ErrorContains(t, err, "unknown claim token")
	g, ok, err := restarted.Bind(newEnv, ctr)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, now, g.CPUs, "the container, created again with the rewritten spec, gets the new CPUs")

	assert.Equal(t, first["uid-2"], res["uid-2"])
	assert.Equal(t, staysBefore, restarted.Claims()["uid-2"], "same CPUs, same token, same container")
	require.NoError(t, restarted.save())
	assert.Equal(t, now, cpusOf(t, td.restart(t), "uid-1", "cpus"), "and the file says so")
}

// A daemon restarted with CPUs offline: a request on one of them is placed
// anew at the next Prepare, on online CPUs of the same NUMA node.
func TestPrepareReplacesARequestOnCPUsGoneOffline(t *testing.T) {
	td := newTestDriver(t, static(t, "xeon-2s-interleaved", ""))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	old := cpusOf(t, td.Driver, "uid-1", "cpus")
	gone := old.List()[old.Size()-1]

	offline := topologyWithOffline(t, "xeon-2s-interleaved", strconv.Itoa(gone))
	s, err := NewStatic(offline, parseConfig(t, ""))
	require.NoError(t, err)
	td.pools = s
	restarted := td.restart(t)
	require.NoError(t, prepare(t, restarted, claim)["uid-1"].Err)
	now := cpusOf(t, restarted, "uid-1", "cpus")
	assert.Equal(t, 4, now.Size())
	assert.False(t, now.Contains(gone), "%s avoids offline CPU %d", now, gone)
	assert.True(t, now.IsSubsetOf(offline.Online))
	assert.Equal(t, "[1]", numaOf(offline, now))
}

func TestUnprepareReleasesAndIsIdempotent(t *testing.T) {
	d := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	// Node 0 has 40 exclusive CPUs: two claims of 20 fill it.
	prepare(t, d.Driver,
		allocatedClaim("uid-1", "a", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 20)}, "pod-1"),
		allocatedClaim("uid-2", "b", slots{"cpus": slotsOn(pools.Exclusive, 0, 20, 20)}, "pod-2"))
	first := cpusOf(t, d.Driver, "uid-1", "cpus")

	full := prepare(t, d.Driver, allocatedClaim("uid-3", "c", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 1)}, "pod-3"))["uid-3"]
	require.Error(t, full.Err)
	assert.Contains(t, full.Err.Error(), "claim ns/c: request cpus: pool exclusive has 0 free CPUs on NUMA node 0")
	assert.Contains(t, full.Err.Error(), "the kubelet retries")
	assert.NotContains(t, d.Claims(), "uid-3")
	assert.NoFileExists(t, cdiFile(d.cdi, "uid-3"))

	unprepare(t, d.Driver, "uid-1")
	assert.NotContains(t, d.Claims(), "uid-1")
	assert.NoFileExists(t, cdiFile(d.cdi, "uid-1"))
	unprepare(t, d.Driver, "uid-1", "never-prepared")

	require.NoError(t, prepare(t, d.Driver, allocatedClaim("uid-3", "c", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 20)}, "pod-3"))["uid-3"].Err)
	assert.Equal(t, first, cpusOf(t, d.Driver, "uid-3", "cpus"), "the released CPUs")
}

// A new driver process reads the claims file: it knows every claim, the
// same CPUs and tokens, and does not give them again.
func TestRestartKeepsClaims(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	td := newTestDriver(t, s)
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	res := prepare(t, td.Driver, claim)["uid-1"]
	env := cdiEnv(t, td.cdi, "uid-1")
	g, ok, err := td.Bind(env[CDIDeviceID("uid-1", "cpus")], Container{PodUID: "pod-1", Namespace: "ns", Pod: "p", Name: "c"})
	require.NoError(t, err)
	require.True(t, ok)
	// The binding is written in the background.
	require.NoError(t, td.save())

	restarted := td.restart(t)
	assert.Equal(t, td.Claims(), restarted.Claims())
	assert.Equal(t, res, prepare(t, restarted, claim)["uid-1"])
	assert.Equal(t, env, cdiEnv(t, td.cdi, "uid-1"))
	again, ok, err := restarted.Bind(env[CDIDeviceID("uid-1", "cpus")], Container{PodUID: "pod-1", Namespace: "ns", Pod: "p", Name: "c"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, g, again)
	_, _, err = restarted.Bind(env[CDIDeviceID("uid-1", "cpus")], Container{PodUID: "pod-1", Namespace: "ns", Pod: "p", Name: "other"})
	assert.ErrorContains(t, err, "already gives its CPUs to container c", "the binding survived the restart")

	// Its CPUs are not given to another claim.
	prepare(t, restarted, shareClaim("uid-2", "b", pools.Exclusive, 4, 40, "pod-2"))
	assert.True(t, cpusOf(t, restarted, "uid-2", "cpus").Intersection(cpusOf(t, restarted, "uid-1", "cpus")).IsEmpty())
}

// After a reboot /var/run/cdi is empty and the kubelet prepares again: the
// spec is written again, with the remembered token.
func TestRebootRewritesTheCDISpec(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	res := prepare(t, td.Driver, claim)["uid-1"]
	env := cdiEnv(t, td.cdi, "uid-1")

	require.NoError(t, os.RemoveAll(td.cdi))
	booted := td.restart(t)
	assert.Equal(t, res, prepare(t, booted, claim)["uid-1"])
	assert.Equal(t, env, cdiEnv(t, td.cdi, "uid-1"))
}

// A claim deallocated and allocated again keeps its UID: a Prepare with
// another allocation places it anew, and the old tokens stop working.
func TestPrepareOfAReallocatedClaim(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	td := newTestDriver(t, s)
	topo, _ := s.Layout()
	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))
	oldEnv := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]

	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 4)}, "pod-2"))
	assert.Equal(t, "[2]", numaOf(topo, cpusOf(t, td.Driver, "uid-1", "cpus")))
	_, _, err := td.Bind(oldEnv, Container{PodUID: "pod-2", Name: "c"})
	assert.ErrorContains(t, err, "unknown claim token")
}

// The claims are on disk when Prepare returns: a kill -9 right after it
// loses nothing. A file that cannot be written fails the Prepare and
// nothing is remembered.
func TestPrepareWritesTheClaimsFileBeforeItAnswers(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	prepare(t, td.Driver, allocatedClaim("uid-1", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1"))
	assert.Contains(t, td.restart(t).Claims(), "uid-1")

	// The state directory becomes a file: every write fails.
	dir := filepath.Dir(td.claims)
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.WriteFile(dir, nil, 0o600))
	res := prepare(t, td.Driver, allocatedClaim("uid-2", "b", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-2"))["uid-2"]
	assert.ErrorContains(t, res.Err, "claim ns/b: saving DRA claims")
	assert.NotContains(t, td.Claims(), "uid-2")
	assert.Contains(t, td.Claims(), "uid-1")
	assert.NoFileExists(t, cdiFile(td.cdi, "uid-2"))
}

func TestCorruptClaimsFileIsMovedAside(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	require.NoError(t, os.MkdirAll(filepath.Dir(td.claims), 0o700))
	require.NoError(t, os.WriteFile(td.claims, []byte(`{"version":1,"claims":{"x":{"requests":{"r":{"pool":"exclusive"}}}}}`), 0o600))
	d := td.restart(t)
	assert.Empty(t, d.Claims())
	aside, _ := filepath.Glob(td.claims + ".corrupt-*")
	assert.Len(t, aside, 1)
}

func TestPrepareRefusesWhatIsNotOurs(t *testing.T) {
	d := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	other := allocatedClaim("uid-1", "x", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 1)}, "pod-1")
	other.Status.Allocation.Devices.Results[0].Pool = "node-b"
	admin := allocatedClaim("uid-2", "y", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 1)}, "pod-1")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = new(bool)
	*admin.Status.Allocation.Devices.Results[0].AdminAccess = true
	mixed := allocatedClaim("uid-3", "z", slots{"cpus": {SlotName(pools.Exclusive, 0, 0), SlotName(pools.ExclusiveNonIsolcpus, 0, 0)}}, "pod-1")
	badName := allocatedClaim("uid-4", "w", slots{"cpus": {"gpu-0"}}, "pod-1")
	noCapacity := allocatedClaim("uid-6", "u", slots{"cpus": {GroupName(pools.Exclusive, 0)}}, "pod-1")
	res := prepare(t, d.Driver, other, admin, mixed, badName, noCapacity)
	assert.ErrorContains(t, res["uid-6"].Err, "allocated without consumed capacity cpupool.dev/cpus; the scheduler needs the DRAConsumableCapacity feature")
	assert.ErrorContains(t, res["uid-1"].Err, `claim ns/x: device exclusive-numa0-0 is from pool "node-b", not this node's (node-a)`)
	assert.ErrorContains(t, res["uid-2"].Err, "asks for admin access")
	assert.ErrorContains(t, res["uid-3"].Err, "a request's CPUs come from one pool")
	assert.ErrorContains(t, res["uid-4"].Err, `device "gpu-0" is not a device of cpupool.dev`)
	assert.Empty(t, d.Claims())

	// Other drivers' devices of the claim are none of our business.
	nic := allocatedClaim("uid-5", "v", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 1)}, "pod-1")
	nic.Status.Allocation.Devices.Results = append(nic.Status.Allocation.Devices.Results,
		resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "dra.net", Pool: testNode, Device: "eth1"})
	res = prepare(t, d.Driver, nic)
	require.NoError(t, res["uid-5"].Err)
	assert.Len(t, res["uid-5"].Devices, 1)
}

// CPUs containers hold (running, or held for their pods) are never given
// to a claim, whatever the scheduler thinks.
func TestPrepareAvoidsCPUsContainersHold(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	_, err := s.Allocator().Allocate(allocator.Request{ID: "old", Pod: allocator.PodRef{Namespace: "ns", Name: "old", UID: "old"}, Container: "c",
		Pool: pools.Exclusive, MilliCPU: 38000, NUMANodes: set(t, "0"), PreferNUMA: cpuset.New()})
	require.NoError(t, err)
	res := prepare(t, d.Driver, allocatedClaim("uid-1", "a", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 4)}, "pod-1"))["uid-1"]
	assert.ErrorContains(t, res.Err, `pool exclusive has 2 free CPUs on NUMA node 0 ("`)
	require.NoError(t, prepare(t, d.Driver, allocatedClaim("uid-1", "a", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 2)}, "pod-1"))["uid-1"].Err)
	held, _ := s.Allocator().Get("old")
	assert.True(t, cpusOf(t, d.Driver, "uid-1", "cpus").Intersection(held.CPUs).IsEmpty())
}
