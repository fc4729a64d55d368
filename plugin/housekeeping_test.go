package plugin

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
)

// housekeptDesktop is desktop with host processes kept off the CPUs its
// exclusive and exclusive-non-isolcpus containers hold.
var housekeptDesktop = testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15", housekeeping: held}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true, housekeeping: held}
allowedNamespaces:
  exclusive: [telco]
`}

// housekeptFiles are the host files housekeeping narrows on the fake
// node, as it booted: the workqueue mask of its 16 CPUs, system (empty:
// every CPU) and a service confined to CPUs 0-11, next to the pods' tree.
var housekeptFiles = map[string]string{"workqueue": "ffff", "system": "", "service": "0-11", "kubepods": ""}

// housekeptNode is a fake runtime whose cgroup v2 hierarchy, not run by
// systemd, delegates cpuset to the top-level cgroups, and whose sysfs has
// the unbound workqueue mask.
func housekeptNode(t *testing.T) *fakeRuntime {
	t.Helper()
	f := newFakeRuntime(t, true)
	write := func(path, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
	write(filepath.Join(f.cgroupRoot, "cgroup.subtree_control"), "cpuset cpu memory")
	for _, dir := range []string{"system", "service", "kubepods"} {
		write(filepath.Join(f.cgroupRoot, dir, "cpuset.cpus"), housekeptFiles[dir])
	}
	write(filepath.Join(f.sysfsRoot(desktop.fixture), housekeeping.WorkqueueMask), housekeptFiles["workqueue"])
	write(filepath.Join(f.procRoot(), "sys/kernel/random/boot_id"), bootID)
	write(filepath.Join(f.procRoot(), "1/comm"), "init")
	return f
}

func housekeptNow(t *testing.T, f *fakeRuntime) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name := range housekeptFiles {
		path := filepath.Join(f.cgroupRoot, name, "cpuset.cpus")
		if name == "workqueue" {
			path = filepath.Join(f.sysfsRoot(desktop.fixture), housekeeping.WorkqueueMask)
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		out[name] = strings.TrimSpace(string(data))
	}
	return out
}

// housekeptFor is what the files hold while cpus are held.
func housekeptFor(t *testing.T, cpus cpuset.CPUSet) map[string]string {
	t.Helper()
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	mask := 0
	for _, c := range all.Difference(cpus).List() {
		mask |= 1 << c
	}
	service := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11).Difference(cpus)
	return map[string]string{"workqueue": fmt.Sprintf("%04x", mask), "system": all.Difference(cpus).String(), "service": service.String(), "kubepods": ""}
}

// TestHousekeepingFollowsGrants: a granted exclusive CPU leaves the
// workqueue mask and the top-level cgroups in the background pass the
// grant kicks (no explicit flush), an exclusive-non-isolcpus CPU when
// lent, and both come back, each file exactly as it was, when the pods
// end. The pods' tree is never touched.
func TestHousekeepingFollowsGrants(t *testing.T) {
	f := housekeptNode(t)
	rp := startPlugin(t, f, housekeptDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, housekeptFiles, housekeptNow(t, f), "nothing held: nothing changed")

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	held := cpusOf(t, f, f.cpus(fwd))
	require.Equal(t, 2, held.Size())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, housekeptFor(t, held), housekeptNow(t, f))
	}, 5*time.Second, 10*time.Millisecond, "within a pass of the grant")

	assert.Equal(t, []string{"kubepods"}, rp.p.podCgroups(), "the pods' tree, from the sandboxes")

	eni := f.runPod(podSpec{name: "eni", namespace: "default", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	lent, _, err := f.createContainer(eni, "app", 1000)
	require.NoError(t, err)
	held = held.Union(cpusOf(t, f, f.cpus(lent)))
	require.Equal(t, 3, held.Size())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, housekeptFor(t, held), housekeptNow(t, f))
	}, 5*time.Second, 10*time.Millisecond, "the lent CPU too")
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_host_files_changed Host files the plugin changed and has not restored yet (their originals are in the journal), by owner (irq, cpuset, power, housekeeping, rps, workqueues).
# TYPE cpupool_host_files_changed gauge
cpupool_host_files_changed{owner="cpuset"} 0
cpupool_host_files_changed{owner="housekeeping"} 3
cpupool_host_files_changed{owner="irq"} 0
`), "cpupool_host_files_changed"), "the workqueue mask, system and service")

	for _, pod := range []*api.PodSandbox{telco, eni} {
		f.removePod(pod)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, housekeptFiles, housekeptNow(t, f))
	}, 5*time.Second, 10*time.Millisecond, "released: every file exactly as it was")
	require.NoError(t, rp.p.FlushIsolation()) // the pass that restored them has committed the journal
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestHousekeepingAfterKill: the plugin is killed while host processes
// are kept off a container's CPUs. The next plugin puts every file back
// exactly when it runs without the feature or with a config that no
// longer keeps the container's pool (the container still running), or
// when the pod ended while it was away; with the feature and the
// container still there, it keeps the CPUs free, computed from the
// originals, and restores them when the pod ends.
func TestHousekeepingAfterKill(t *testing.T) {
	for _, tc := range []struct {
		name    string
		next    testNode
		podEnds bool
	}{
		{"restart without the feature", desktop, false},
		{"restart with another config", testNode{fixture: desktop.fixture, config: strings.Replace(housekeptDesktop.config,
			"exclusive-non-isolcpus: {enabled: true, housekeeping: held}", "exclusive-non-isolcpus: {enabled: true}", 1)}, false},
		{"pod ends while away", housekeptDesktop, true},
		{"container still runs", housekeptDesktop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := housekeptNode(t)
			first := startPlugin(t, f, housekeptDesktop, statePath(f))
			pod := f.runPod(podSpec{name: "eni", namespace: "default", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
			ctr, _, err := f.createContainer(pod, "app", 1000)
			require.NoError(t, err)
			require.NoError(t, first.p.FlushIsolation())
			held := cpusOf(t, f, f.cpus(ctr))
			require.Equal(t, housekeptFor(t, held), housekeptNow(t, f))
			first.kill()
			if tc.podEnds {
				f.removeContainer(ctr)
				f.removePod(pod)
			}

			second := startPlugin(t, f, tc.next, statePath(f))
			require.NoError(t, second.p.FlushIsolation())
			if tc.podEnds || tc.next.config != housekeptDesktop.config {
				assert.Equal(t, housekeptFiles, housekeptNow(t, f), "every file exactly as it was")
				records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
				require.NoError(t, err)
				assert.Empty(t, records)
				assert.NotContains(t, second.log.String(), "no source of this process claims", "its own records, not another version's")
				return
			}
			assert.Equal(t, housekeptFor(t, held), housekeptNow(t, f), "from the originals")
			f.removeContainer(ctr)
			f.removePod(pod)
			require.NoError(t, second.p.FlushIsolation())
			assert.Equal(t, housekeptFiles, housekeptNow(t, f))
		})
	}
}

// TestHousekeepingAlways: a pool kept always keeps the host off all its
// CPUs from the first Synchronize, with no container; a shared pool too.
func TestHousekeepingAlways(t *testing.T) {
	f := housekeptNode(t)
	node := testNode{fixture: desktop.fixture, config: strings.NewReplacer(
		"exclusive: {cpus: \"4-7,12-15\", housekeeping: held}", "exclusive: {cpus: \"4-7,12-15\", housekeeping: always}",
		"shared: {cpus: \"2-3,10-11\"}", "shared: {cpus: \"2-3,10-11\", housekeeping: always}").Replace(housekeptDesktop.config)}
	require.Contains(t, node.config, "housekeeping: always}\n  shared")
	rp := startPlugin(t, f, node, statePath(f))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, housekeptFor(t, cpuset.New(2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15)), housekeptNow(t, f))
	}, 5*time.Second, 10*time.Millisecond, "the host keeps infra: 0-1,8-9")
	require.NoError(t, rp.p.FlushIsolation())
}

// TestPodCgroupsFlat: the housekeeping Source asks for the pods' top-level
// cgroups at every pass; each sandbox's is worked out once, so a pass
// allocates no more with 1,000 pods than with 10 (issue 45: naming every
// pod's cgroup made a pass's allocations grow with the pods), and the
// answer is what the sandboxes' cgroup parents say.
func TestPodCgroupsFlat(t *testing.T) {
	pods := func(n int) *Plugin {
		p := &Plugin{sandbox: map[string]sandbox{}}
		for i := 0; i < n; i++ {
			id := strconv.Itoa(i)
			parent := "/kubepods/burstable/pod" + id
			if i%2 == 1 {
				parent = "kubepods-besteffort-pod" + id + ".slice"
			}
			p.sandbox["sb"+id] = sandbox{uid: "uid" + id, cgroupParent: parent}
		}
		p.sandbox["root"] = sandbox{uid: "root", cgroupParent: "/"}
		return p
	}
	// The least of 5 counts: AllocsPerRun counts every goroutine's
	// allocations, and another test's leftover goroutine may allocate
	// during one of them on a loaded machine. Naming each pod's cgroup at
	// every call made 5,502 with 1,000 pods.
	per := func(p *Plugin) float64 {
		least := math.Inf(1)
		for range 5 {
			least = min(least, testing.AllocsPerRun(20, func() { p.podCgroups() }))
		}
		return least
	}
	few, many := pods(10), pods(1000)
	assert.ElementsMatch(t, []string{"kubepods", "kubepods.slice"}, many.podCgroups())
	a10, a1000 := per(few), per(many)
	t.Logf("allocations per call: %.0f with 10 pods, %.0f with 1,000", a10, a1000)
	assert.LessOrEqual(t, a1000, a10+50, "podCgroups allocates more with 1,000 pods (%.0f) than with 10 (%.0f)", a1000, a10)
}
