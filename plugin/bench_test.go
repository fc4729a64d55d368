package plugin

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// largeNode: 384 CPUs, 8 NUMA nodes; one core kept for infra.
var largeNode = testNode{fixture: "epyc-2s-384", config: `isolatedCPUs: "1-191,193-383"`}

// noopPlugin subscribes to the same events and decides nothing: the
// baseline for the cost the runtime pays for any NRI plugin.
type noopPlugin struct{}

func (noopPlugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}
func (noopPlugin) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (noopPlugin) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }

func startNoop(b *testing.B, f *fakeRuntime) {
	before := f.syncCount()
	s, err := stub.New(noopPlugin{}, stub.WithPluginName("noop"), stub.WithPluginIdx("10"), stub.WithSocketPath(f.socket))
	require.NoError(b, err)
	require.NoError(b, s.Start(context.Background()))
	b.Cleanup(s.Stop)
	f.waitSynced(before)
}

// BenchmarkCreateContainerRoundTrip measures CreateContainer through the
// runtime-side NRI library with 500 running containers (half 1-CPU exclusive,
// half infra) on the 384-CPU node: with nri-cpupool,
// including its durable state write, and with a no-op plugin.
func BenchmarkCreateContainerRoundTrip(b *testing.B) {
	for _, which := range []string{"noop", "cpupool"} {
		b.Run(which, func(b *testing.B) {
			f := newFakeRuntime(b, false)
			if which == "noop" {
				startNoop(b, f)
			} else {
				startPlugin(b, f, largeNode, statePath(f))
			}
			for i := 0; i < 500; i++ {
				pod := f.runPod(podSpec{name: "run" + id(i), annotations: exclusiveEvery(i)})
				_, _, err := f.createContainer(pod, "c", 1000)
				require.NoError(b, err)
			}
			pods := make([]*api.PodSandbox, b.N)
			for i := range pods {
				pods[i] = f.runPod(podSpec{name: "bench" + strconv.Itoa(i), annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
			}
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				ctr, _, err := f.createContainer(pods[i], "c", 2000)
				samples = append(samples, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				f.stopContainer(ctr)
				f.removeContainer(ctr)
				f.removePod(pods[i])
				b.StartTimer()
			}
			b.StopTimer()
			benchutil.ReportLatency(b, samples)
		})
	}
}

// exclusiveEvery makes every second container a 1-CPU exclusive one and
// the others infra members.
func exclusiveEvery(i int) map[string]string {
	if i%2 == 0 {
		return nil // infra
	}
	return map[string]string{"pool.cpupool.dev": "exclusive"}
}

// BenchmarkSynchronize1000 measures reconciling 1,000 containers (800
// remembered exclusive ones, 200 infra) after a restart, state write
// included.
func BenchmarkSynchronize1000(b *testing.B) {
	cfg, err := config.Parse(strings.NewReader(largeNode.config), "bench")
	require.NoError(b, err)
	cfg.SysfsRoot = fixture.Root(b, largeNode.fixture)
	cfg.CgroupRoot = b.TempDir()
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(b, err)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	store := NewFileStore(filepath.Join(b.TempDir(), "state.json"))

	st := NewState()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	cpu := 2
	for i := 0; i < 1000; i++ {
		pod := &api.PodSandbox{Id: "sb" + id(i), Name: "p" + id(i), Uid: "u" + id(i), Namespace: "ns",
			Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podu" + id(i), CgroupsPath: "/kubepods/podu" + id(i) + "/sb" + id(i)}}
		ctr := &api.Container{Id: "c" + id(i), PodSandboxId: pod.Id, Name: "c", State: api.ContainerState_CONTAINER_RUNNING,
			Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2)}}}}
		if i < 800 && cpu < 383 {
			// Remembered: give each a distinct exclusive CPU (skipping 192).
			if cpu == 192 {
				cpu++
			}
			cs := strconv.Itoa(cpu)
			st.Containers[ctr.Id] = ContainerState{PodUID: pod.Uid, PodNamespace: "ns", PodName: pod.Name, Container: "c", Pool: "exclusive", MilliCPU: 1000, CPUs: cs}
			ctr.Linux.Resources.Cpu.Cpus = cs
			ctr.Linux.Resources.Cpu.Shares = api.UInt64(1024)
			pod.Annotations = map[string]string{"pool.cpupool.dev": "exclusive"}
			cpu++
		}
		pods, ctrs = append(pods, pod), append(ctrs, ctr)
	}
	require.NoError(b, store.Save(st))
	p, err := New(cfg, topo, store, log)
	require.NoError(b, err)
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := p.Synchronize(context.Background(), pods, ctrs); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	benchutil.ReportLatency(b, samples)
}

// BenchmarkPluginRSS builds the real binary, runs it against the runtime
// side with 500 containers on the 384-CPU node and reports its peak RSS.
// It measures once whatever b.N is: run it with -benchtime=1x.
func BenchmarkPluginRSS(b *testing.B) {
	bin := buildBinary(b)
	dir := b.TempDir()

	f := newFakeRuntime(b, false)
	cfgFile := filepath.Join(dir, "config.yaml")
	require.NoError(b, os.WriteFile(cfgFile, []byte(largeNode.config), 0o644))
	before := f.syncCount()
	cmd := exec.Command(bin, "run", "--config", cfgFile, "--nri-socket", f.socket, "--state-file", filepath.Join(dir, "state.json"),
		"--sysfs-root", fixture.Root(b, largeNode.fixture), "--cgroup-root", f.cgroupRoot, "--log-level", "warn")
	require.NoError(b, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	f.waitSynced(before)
	for i := 0; i < 500; i++ {
		pod := f.runPod(podSpec{name: "rss" + id(i), annotations: exclusiveEvery(i)})
		_, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(b, err)
	}
	hwm, err := peakRSS(cmd.Process.Pid)
	require.NoError(b, err)
	b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
}

func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
