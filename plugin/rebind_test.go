package plugin

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestCopiedTokenNeverTakesTheBinding: a tenant copies the token of a
// running container of the resource into another pod's environment, and
// the runtime creates that copy while the daemon is away (unpinned: no
// plugin answered). Whatever the kill lost (nothing, the grants write
// after the state write, or both writes), and whichever container the
// runtime lists first, Synchronize leaves the grant bound to the owner and
// the owner on its CPUs; the copy is confined, off the owner's CPUs; the
// owner's restart gets its CPUs again, and the copy's restart is refused.
// A binding never moves to another pod's container.
func TestCopiedTokenNeverTakesTheBinding(t *testing.T) {
	for _, lost := range []string{"nothing", "the grants write", "both writes"} {
		for _, copyPod := range []string{"aaa-copy", "zzz-copy"} { // its container's id sorts before or after the owner's
			t.Run(lost+"/"+copyPod, func(t *testing.T) {
				f := newFakeRuntime(t, false)
				path := GrantsFile(statePath(f))
				first := startPluginTuned(t, f, desktopKubelet, statePath(f), func(p *Plugin) {
					if lost == "both writes" {
						p.writer.delay = time.Hour
					}
				})
				env := grantEnv(t, first.p, "6", "14")
				tok := env[len(EnvGrant)+1:]
				if lost == "the grants write" {
					setReplace(first.p, func(string, []byte, bool) error { return errors.New("disk full") })
				}
				pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
				owner, resp, err := f.createWithEnv(pod, "app", 0, env)
				require.NoError(t, err)
				require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
				switch lost {
				case "nothing":
					require.NoError(t, first.p.Flush())
					require.Equal(t, "app", grantsOnDisk(t, path)[tok].Container, "the binding is on disk")
				case "the grants write":
					require.Error(t, first.p.Flush())
					require.Empty(t, grantsOnDisk(t, path)[tok].PodUID, "the binding is not on disk")
				case "both writes":
					require.Empty(t, grantsOnDisk(t, path)[tok].PodUID, "the binding is not on disk")
				}
				first.kill()

				other := f.runPod(podSpec{name: copyPod, namespace: "telco"})
				copied, _, err := f.createWithEnv(other, "app", 0, env)
				require.NoError(t, err, "no plugin answers: the runtime creates it as it is")
				require.Empty(t, f.cpus(copied), "created unpinned")

				second := startPlugin(t, f, desktopKubelet, statePath(f))
				assert.Equal(t, grant{CPUs: "6,14", Seq: 1, PodUID: "uid-dpdk", Namespace: "telco", Pod: "dpdk", Container: "app"}, grantsInMemory(second.p)[tok],
					"the grant stays bound to the owner")
				assert.Equal(t, "6,14", f.cpus(owner), "the owner stays on its CPUs")
				assert.Equal(t, "exclusive", poolOf(second.p, owner.Id))
				assert.Equal(t, "infra", poolOf(second.p, copied.Id), "the copy is confined")
				assert.True(t, mustParse(f.cpus(copied)).Intersection(cpuset.New(6, 14)).IsEmpty(), "the copy runs on %s, off the owner's CPUs", f.cpus(copied))
				assertEveryCPUAccounted(t, f, second.p)
				require.NoError(t, second.p.Flush())
				assert.Equal(t, grantsInMemory(second.p), grantsOnDisk(t, path), "the file has the binding")

				f.exitContainer(copied, 1)
				f.removeContainer(copied)
				_, _, err = f.createWithEnv(other, "app", 0, env)
				require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/app", "the copy's restart is refused")
				f.exitContainer(owner, 1)
				f.removeContainer(owner)
				_, resp, err = f.createWithEnv(pod, "app", 0, env)
				require.NoError(t, err, "the owner's restart is admitted")
				assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
			})
		}
	}
}

// TestAdoptionKeepsPinnedContainersWhereTheyRun: killed before its state
// write, the daemon restarts knowing none of the containers; one runs
// pinned where the lost decision put it, another was created unpinned
// while the daemon was away. Whichever the runtime lists first, the pinned
// one stays where it runs and the other is placed around it: no exclusive
// container moves once pinned.
func TestAdoptionKeepsPinnedContainersWhereTheyRun(t *testing.T) {
	for _, later := range []string{"aaa-later", "zzz-later"} { // its container's id sorts before or after the pinned one's
		t.Run(later, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startPluginTuned(t, f, desktop, statePath(f), func(p *Plugin) { p.writer.delay = time.Hour })
			exclusive := map[string]string{"pool.cpupool.dev": "exclusive"}
			pod := f.runPod(podSpec{name: "pinned", namespace: "telco", annotations: exclusive})
			pinned, resp, err := f.createContainer(pod, "app", 2000)
			require.NoError(t, err)
			where := resp.Adjust.Linux.Resources.Cpu.Cpus
			require.NotEmpty(t, where)
			first.kill()

			other := f.runPod(podSpec{name: later, namespace: "telco", annotations: exclusive})
			unpinned, _, err := f.createContainer(other, "app", 2000)
			require.NoError(t, err)
			require.Empty(t, f.cpus(unpinned), "no plugin answers: created unpinned")

			second := startPlugin(t, f, desktop, statePath(f))
			assert.Equal(t, where, f.cpus(pinned), "the pinned container stays where it runs")
			assert.Equal(t, "exclusive", poolOf(second.p, unpinned.Id), "the other is placed")
			assert.True(t, mustParse(f.cpus(unpinned)).Intersection(mustParse(where)).IsEmpty(), "around it: %s", f.cpus(unpinned))
			assertEveryCPUAccounted(t, f, second.p)
		})
	}
}

// TestRebindNeverMovesABinding: Synchronize meets two running exclusive
// containers of different pods that show one token, the owner's and a
// tenant's copy, and the owner's binding is not on disk (the grants write
// after the state write was lost). Rebinding binds the token to the owner,
// which the state file remembers, and the copy does not take it: the grant
// stays with the owner, and the copy's re-creation is refused for it.
//
// Both are exclusive because the owner's cpuset was changed while the
// daemon was away (crictl update, a kubelet CPU manager left on): the
// state's rule keeps an exclusive container that runs on a free whole set
// of the right size where it runs, so the grant's CPUs were free when the
// copy, created unpinned meanwhile, was placed. (Should Synchronize put a
// container of the resource back on its allocation instead, the copy is
// confined before the rebinding, and this test must reach it another way.)
func TestRebindNeverMovesABinding(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	tok := env[len(EnvGrant)+1:]
	setReplace(first.p, func(string, []byte, bool) error { return errors.New("disk full") })
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	owner, _, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Error(t, first.p.Flush(), "the grants write fails after the state write")
	first.kill()
	f.setCPUs(owner, "7,15")
	other := f.runPod(podSpec{name: "copy", namespace: "telco"})
	copied, _, err := f.createWithEnv(other, "app", 0, env)
	require.NoError(t, err)

	second := startPlugin(t, f, desktopKubelet, statePath(f))
	require.Equal(t, "exclusive", poolOf(second.p, owner.Id))
	require.Equal(t, "exclusive", poolOf(second.p, copied.Id), "both run exclusive: the rebinding decides")
	assert.Equal(t, grant{CPUs: "6,14", Seq: 1, PodUID: "uid-dpdk", Namespace: "telco", Pod: "dpdk", Container: "app"}, grantsInMemory(second.p)[tok],
		"the grant is bound to the owner, not moved to the copy")
	assert.Contains(t, second.log.String(), "container telco/copy/app shows the grant of container telco/dpdk/app; the grant stays with it")
	require.NoError(t, second.p.Flush())
	assert.Equal(t, grantsInMemory(second.p), grantsOnDisk(t, GrantsFile(statePath(f))))

	f.stopContainer(copied)
	f.removeContainer(copied)
	_, _, err = f.createWithEnv(other, "app", 0, env)
	require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/app", "the copy's re-creation is refused")
}
