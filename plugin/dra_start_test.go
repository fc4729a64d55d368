package plugin

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestDRADaemonPinsWhileTheKubeletIsAway runs the real daemon with the DRA
// driver on, started before the kubelet as at a node's first boot (issue
// 30, defect 10): its kubeconfig does not exist yet (the node has not
// joined), the kubelet's plugin registration directory does not exist,
// nor does the API server answer. The daemon stays up and pins
// containers, its driver reports that it waits for the kubelet (status
// file and metric); once the kubelet makes its directory and confirms the
// registration, the driver is registered, and pinning went on throughout.
// Before, the driver's failure to listen stopped the daemon.
func TestDRADaemonPinsWhileTheKubeletIsAway(t *testing.T) {
	// nri-cpupool, which execs nri-cpupool-dra for dra.enabled (issue 33).
	bin := buildBinaries(t)
	dir := t.TempDir()
	f := newFakeRuntime(t, false)
	kubelet := filepath.Join(dir, "kubelet")
	registry := filepath.Join(kubelet, "plugins_registry")
	// The kubeconfig does not exist yet either: the node has not joined
	// its cluster (kubeadm join writes it).
	kubeconfig := filepath.Join(dir, "kubeconfig")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := l.Addr().String()
	l.Close()
	cfgFile := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(xeon.config+fmt.Sprintf(`metricsAddress: %q
dra:
  enabled: true
  nodeName: node-a
  kubeconfig: %s
  cdiDir: %s
  pluginDir: %s
  registryDir: %s
`, metricsAddr, kubeconfig, filepath.Join(dir, "cdi"), filepath.Join(kubelet, "plugins", dra.DriverName), registry)), 0o644))
	stateFile := filepath.Join(dir, "state", "state.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(stateFile), 0o750))

	var out syncBuffer
	before := f.syncCount()
	cmd := exec.Command(bin, "run", "--config", cfgFile, "--nri-socket", f.socket, "--state-file", stateFile,
		"--sysfs-root", fixture.Root(t, xeon.fixture), "--cgroup-root", f.cgroupRoot)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	alive := func() {
		t.Helper()
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the daemon exited (%v):\n%s", err, out.String())
		default:
		}
	}
	state := func() dra.State {
		s, _, err := dra.ReadStatus(dra.StatusFile(stateFile))
		if err != nil {
			return ""
		}
		return s.State
	}
	metric := func(s dra.State) string {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, `cpupool_dra_driver_state{state="`+string(s)+`"}`) {
				return line
			}
		}
		return "no cpupool_dra_driver_state for " + string(s)
	}
	pin := func(name string) {
		t.Helper()
		alive()
		pod := f.runPod(podSpec{name: name, namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "shared"}})
		_, resp, err := f.createContainer(pod, "app", 500)
		require.NoError(t, err, "log:\n%s", out.String())
		assert.NotEmpty(t, resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(), "pinned")
	}
	f.waitSynced(before)
	require.Eventually(t, func() bool { alive(); return state() == dra.StateWaitingForCredentials }, 30*time.Second, 20*time.Millisecond,
		"the driver waits for its kubeconfig; status %q; log:\n%s", state(), out.String())
	assert.Equal(t, `cpupool_dra_driver_state{state="waiting-for-credentials"} 1`, metric(dra.StateWaitingForCredentials))
	assert.Contains(t, out.String(), "DRA driver waiting-for-credentials: DRA: kubeconfig "+kubeconfig)
	pin("before-join")

	// The node joins its cluster: the kubeconfig appears.
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: "t"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	require.Eventually(t, func() bool { alive(); return state() == dra.StateWaitingForKubelet }, 30*time.Second, 20*time.Millisecond,
		"the driver waits for the kubelet; status %q; log:\n%s", state(), out.String())
	assert.Equal(t, `cpupool_dra_driver_state{state="waiting-for-kubelet"} 1`, metric(dra.StateWaitingForKubelet))
	assert.Contains(t, out.String(), "DRA driver waiting-for-kubelet: the kubelet's plugin registration directory "+registry+": it does not exist")
	pin("before-kubelet")

	// The kubelet starts: it makes its directory and registers the driver.
	require.NoError(t, os.MkdirAll(registry, 0o750))
	reg := filepath.Join(registry, dra.DriverName+"-reg.sock")
	require.Eventually(t, func() bool { alive(); return fileExists(reg) && state() == dra.StateServing }, 30*time.Second, 20*time.Millisecond,
		"the driver serves once the directory exists; status %q; log:\n%s", state(), out.String())
	conn, err := grpc.NewClient("unix://"+reg, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	registration := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = registration.GetInfo(ctx, &registerapi.InfoRequest{})
	require.NoError(t, err)
	_, err = registration.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true})
	require.NoError(t, err)
	assert.Equal(t, dra.StateRegistered, state())
	assert.Equal(t, `cpupool_dra_driver_state{state="registered"} 1`, metric(dra.StateRegistered))
	pin("after-kubelet")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
