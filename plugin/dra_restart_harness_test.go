package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// restartClaimCPUs is where claim uid-1 (1 NUMA node, 4 CPUs) is placed
// when they are free, and where the kept grant of the restart tests is.
const restartClaimCPUs = "3,5,43,45"

// claimRestart is the scene the DRA restart tests share: the device
// plugin era left a grant of pod telco/old's container app on
// restartClaimCPUs (its pod absent when the daemon started); the daemon
// prepared claim uid-1 on those CPUs for pod telco/dpdk, whose container
// has not started; pod telco/old runs again. The daemon then ends, quietly
// or by a kill -9 (restart), and a second one starts on the same files.
type claimRestart struct {
	f        *fakeRuntime
	tok      string // the kept grant's token
	first    *draNode
	claimPod *api.PodSandbox
	env      []string // what the claim's CDI spec gives its container
	old      *api.PodSandbox
	second   *draNode // once restarted
}

// prepareClaimOnKeptGrant sets the scene up to the daemon's end.
func prepareClaimOnKeptGrant(t *testing.T) *claimRestart {
	t.Helper()
	f := newFakeRuntime(t, false)
	r := &claimRestart{f: f, tok: keptGrantToken(t, f, restartClaimCPUs)}
	r.first = startDRA(t, f)
	r.claimPod = f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	r.env = r.first.prepare(t, "uid-1", 1, 4, r.claimPod)
	require.Equal(t, restartClaimCPUs, r.first.claimCPUs(t, "uid-1"))
	r.old = f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	return r
}

// restartAfter ends the first daemon by end (its stop: the state and
// claims files are up to date; its kill: the claims file still marks the
// claim unanswered) and starts the second.
func (r *claimRestart) restartAfter(t *testing.T, end func()) *draNode {
	t.Helper()
	end()
	r.second = startDRA(t, r.f)
	return r.second
}

// unpinned is a container the runtime created, with no adjustment, while
// the daemon was away, and runs: ID ctr-<pod>-<name>, the environment env
// and, if cpus is not empty, that cpuset in its spec and its cgroup.
func (r *claimRestart) unpinned(t *testing.T, pod *api.PodSandbox, name, cpus string, env ...string) *api.Container {
	t.Helper()
	id := "ctr-" + pod.Name + "-" + name
	c := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_RUNNING, Env: env,
		Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/" + id,
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus, Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
	r.f.mkCgroup(c.Linux.CgroupsPath)
	if cpus != "" {
		require.NoError(t, os.WriteFile(filepath.Join(r.f.hierarchy(), c.Linux.CgroupsPath, "cpuset.cpus"), []byte(cpus+"\n"), 0o644))
	}
	return c
}

// unpinnedGrantContainer is pod telco/old's container app, showing the
// kept grant's token.
func (r *claimRestart) unpinnedGrantContainer(t *testing.T, cpus string) *api.Container {
	t.Helper()
	return r.unpinned(t, r.old, "app", cpus, EnvGrant+"="+r.tok)
}

// synchronize is the second daemon's Synchronize with both pods and the
// containers the runtime reports running.
func (r *claimRestart) synchronize(t *testing.T, containers ...*api.Container) {
	t.Helper()
	_, err := r.second.p.Synchronize(context.Background(), []*api.PodSandbox{r.claimPod, r.old}, containers)
	require.NoError(t, err)
}
