package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/version"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPluginUpdatesSafeByNRIVersion(t *testing.T) {
	for _, tc := range []struct {
		nri  string
		safe bool
	}{
		{"v0.12.3", true},  // containerd 2.4
		{"v0.12.1", true},  // the fix (containerd/nri#301)
		{"v0.13.0", true},  // later
		{"v1.0.0", true},   // later
		{"v0.12.0", false}, // containerd 2.3
		{"v0.11.0", false}, // containerd 2.2, CRI-O 1.36
		{"v0.8.0", false},  // containerd 2.0, 2.1
		{"v0.12.1-rc.1", false},
		{"unknown", false}, // CRI-O: no version sent, none inferred
		{"", false},
		{"devel", false},
		{"0.12.3", false},
	} {
		assert.Equal(t, tc.safe, runtimeInfo{nriVersion: tc.nri}.pluginUpdatesSafe(), tc.nri)
	}
}

// TestRepliesOnlyOnOldNRI: on a runtime whose NRI may deadlock on a plugin's
// own UpdateContainers, a pod's removal sends nothing by itself; the infra members
// learn of the grown infra in the next reply, and the sandboxes (pinned
// through cgroupfs) at once.
func TestRepliesOnlyOnOldNRI(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f), func(p *Plugin) { p.assumeNRIVersion = "v0.11.0" })
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "0,8-9", f.cpus(app))

	f.removeContainer(eni) // no StopContainer first; the CPU stays held for the pod
	f.removePod(pod)
	assert.Equal(t, "0-1,8-9", f.sandboxCPUs(web), "sandboxes follow at once")
	time.Sleep(200 * time.Millisecond) // an unsolicited update would have arrived by now
	assert.Equal(t, "0,8-9", f.cpus(app), "no update outside a reply")

	// The next event with a reply carries it.
	other := f.runPod(podSpec{name: "other", qos: "besteffort"})
	_, resp, err := f.createContainer(other, "c", 0)
	require.NoError(t, err)
	require.Len(t, resp.Update, 1, "the pending update rides on the reply")
	assert.Equal(t, app.Id, resp.Update[0].ContainerId)
	assert.Equal(t, "0-1,8-9", f.cpus(app))

	want := `
# HELP cpupool_runtime_info The connected runtime, the NRI version it embeds, and whether the plugin sends updates on its own (NRI >= v0.12.1) or only in replies.
# TYPE cpupool_runtime_info gauge
cpupool_runtime_info{nri_version="v0.11.0",plugin_updates="replies-only",runtime="fake-runtime",version="v0"} 1
# HELP cpupool_runtime_synchronizations_total Times the runtime synchronized the plugin: at registration and after every reconnect.
# TYPE cpupool_runtime_synchronizations_total counter
cpupool_runtime_synchronizations_total 1
`
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(want), "cpupool_runtime_info", "cpupool_runtime_synchronizations_total"))
}

// TestRuntimeInfoFromTheStub: without an assumed version, the NRI library's
// own version (what this test's runtime side embeds) is the runtime's, so
// updates after removals are sent on their own only if that is v0.12.1 or
// later.
func TestRuntimeInfoFromTheStub(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f), func(p *Plugin) { p.assumeNRIVersion = "" })
	n, err := testutil.GatherAndCount(rp.p.Registry(), "cpupool_runtime_info")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	mfs, err := rp.p.Registry().Gather()
	require.NoError(t, err)
	labels := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() == "cpupool_runtime_info" {
			for _, l := range mf.GetMetric()[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
		}
	}
	// The runtime side here is the same NRI library as the plugin's, so it
	// reports the version this binary was built with.
	assert.Equal(t, version.GetFromBuildInfo(), labels["nri_version"], "%v", labels)
	assert.Equal(t, map[bool]string{true: "unsolicited", false: "replies-only"}[nriAtLeast(labels["nri_version"], minNRIForPluginUpdates)],
		labels["plugin_updates"], "%v", labels)

	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.synchronized), "one registration, one synchronization")
}

func TestContainerName(t *testing.T) {
	for _, tc := range []struct {
		ctr  *api.Container
		want string
	}{
		{&api.Container{Id: "1", Name: "app", Labels: map[string]string{containerNameLabel: "other"}}, "app"},
		// CRI-O without the kubelet's label.
		{&api.Container{Id: "2", Labels: map[string]string{containerNameLabel: "app"}}, "app"},
		{&api.Container{Id: "3f2a"}, "id-3f2a"},
	} {
		assert.Equal(t, tc.want, containerName(tc.ctr))
	}
}
