package plugin

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// memoryStore keeps the state in memory: the benchmarks below measure what
// an annotation costs, not the disk (the state write leaves the reply path
// with issue 10).
type memoryStore struct{}

func (memoryStore) Load() (*state.State, error) { return state.NewState(), nil }
func (memoryStore) Save(*state.State) error     { return nil }
func (memoryStore) Close()                      {}
func (memoryStore) Sync() error                 { return nil }

// worstAnnotations are the costliest annotation sets: hostile ones (the
// slowest inputs of the fuzzers and of issue 9, refused before the lock or
// by the bounded parser) and the largest legal set (every key at every
// scope, the longest NUMA list, the most device paths, each resolved
// through sysfs).
func worstAnnotations() map[string]map[string]string {
	maximal := map[string]string{}
	for _, key := range []string{"pool.cpupool.dev", "hide-hyperthreads.cpupool.dev", "full-pcpus-only.cpupool.dev",
		"distribute-across-numa.cpupool.dev", "numa.cpupool.dev", "device.cpupool.dev"} {
		for _, scope := range []string{"", "/pod", "/container.c"} {
			maximal[key+scope] = map[string]string{
				"pool.cpupool.dev": "exclusive", "hide-hyperthreads.cpupool.dev": "false", "full-pcpus-only.cpupool.dev": "false",
				"distribute-across-numa.cpupool.dev": "true",
				"numa.cpupool.dev":                   strings.TrimSuffix(strings.Repeat("0,1,", 32), ","),                                                      // 64 items
				"device.cpupool.dev":                 strings.TrimSuffix(strings.Repeat("/sys/bus/pci/devices/0000:3b:00.0,/sys/class/net/ens801f0,", 4), ","), // 8 paths
			}[key]
		}
	}
	for i := 0; i < 100; i++ { // foreign annotations beside ours
		maximal["example.com/key-"+id(i)] = strings.Repeat("v", 1000)
	}
	return map[string]map[string]string{
		"maximal-legal":          maximal,
		"numa-int64-max-range":   {"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "0-9223372036854775807"},
		"numa-0-3000000":         {"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "0-3000000"},
		"numa-64-overlapping":    {"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": strings.TrimSuffix(strings.Repeat("0-1,", 64), ",")},
		"numa-200KiB":            {"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": strings.Repeat("0,", 100000) + "0"},
		"device-1000-paths":      {"pool.cpupool.dev": "exclusive", "device.cpupool.dev": strings.Repeat("/sys/class/net/x,", 1000)},
		"unknown-keys-128":       unknownKeys(128),
		"device-missing-8-paths": {"pool.cpupool.dev": "exclusive", "device.cpupool.dev": strings.TrimSuffix(strings.Repeat("/sys/class/net/nope,", 8), ",")},
	}
}

func unknownKeys(n int) map[string]string {
	m := map[string]string{}
	for i := 0; i < n; i++ {
		m["pool.cpupool.dev/container.c"+id(i)] = "shared"
	}
	m["pol.cpupool.dev"] = "x"
	return m
}

// BenchmarkWorstCaseAnnotation measures CreateContainer (its whole handler,
// an upper bound of the time it holds the plugin's lock) for the worst
// annotations on the 80-CPU, 2-node Xeon fixture with its PCI devices, 40
// containers already placed. Target: ≤ 1 ms each. (The state is written in
// the background, so no file I/O is part of it either way.)
func BenchmarkWorstCaseAnnotation(b *testing.B) {
	cfg, topo := benchNode(b, testNode{fixture: "xeon-2s-interleaved", config: `isolatedCPUs: "2-39,42-79"
pools:
  shared: {cpus: "2-9,42-49"}
  exclusive-non-isolcpus: {enabled: true}
`})
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx := context.Background()
	for name, ann := range worstAnnotations() {
		b.Run(name, func(b *testing.B) {
			p, err := New(cfg, topo, memoryStore{}, log)
			require.NoError(b, err)
			_, err = p.Synchronize(ctx, nil, nil)
			require.NoError(b, err)
			for i := 0; i < 40; i++ {
				pod := &api.PodSandbox{Id: "sb" + id(i), Uid: "u" + id(i), Name: "p" + id(i), Namespace: "ns",
					Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
				_, _, err := p.CreateContainer(ctx, pod, benchContainer("bg"+id(i), 1000))
				require.NoError(b, err)
			}
			pod := &api.PodSandbox{Id: "sb", Uid: "u", Name: "p", Namespace: "ns", Annotations: ann}
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ctr := benchContainer("c-"+id(i), 2000)
				start := time.Now()
				p.CreateContainer(ctx, pod, ctr)
				samples = append(samples, time.Since(start))
				b.StopTimer()
				p.StopContainer(ctx, pod, ctr)
				p.RemoveContainer(ctx, pod, ctr)
				b.StartTimer()
			}
			benchutil.ReportLatency(b, samples)
		})
	}
}

func benchContainer(cid string, milli int64) *api.Container {
	return &api.Container{Id: cid, Name: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{
		Shares: api.UInt64(uint64(milli * 1024 / 1000))}}}}
}

// BenchmarkPodRemoval measures StopPodSandbox then RemovePodSandbox (the
// handlers, state in memory) of a pod with one 2-CPU exclusive container
// on the 384-CPU node with 1,000 running containers: replies that must
// not grow with the node (a pod's release once sorted every container).
func BenchmarkPodRemoval(b *testing.B) {
	cfg, topo := benchNode(b, largeNode)
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx := context.Background()
	p, err := New(cfg, topo, memoryStore{}, log)
	require.NoError(b, err)
	_, err = p.Synchronize(ctx, nil, nil)
	require.NoError(b, err)
	for i := 0; i < 1000; i++ {
		pod := &api.PodSandbox{Id: "sb" + id(i), Uid: "u" + id(i), Name: "p" + id(i), Namespace: "ns", Annotations: exclusiveEvery(i)}
		require.NoError(b, p.RunPodSandbox(ctx, pod))
		_, _, err := p.CreateContainer(ctx, pod, benchContainer("bg"+id(i), 1000))
		require.NoError(b, err)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pod := &api.PodSandbox{Id: "sb-x" + id(i), Uid: "u-x" + id(i), Name: "x" + id(i), Namespace: "ns",
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
		require.NoError(b, p.RunPodSandbox(ctx, pod))
		ctr := benchContainer("x-"+id(i), 2000)
		_, _, err := p.CreateContainer(ctx, pod, ctr)
		require.NoError(b, err)
		_, err = p.StopContainer(ctx, pod, ctr)
		require.NoError(b, err)
		b.StartTimer()
		start := time.Now()
		require.NoError(b, p.StopPodSandbox(ctx, pod))
		require.NoError(b, p.RemovePodSandbox(ctx, pod))
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	benchutil.ReportLatency(b, samples)
}

// benchNode is a plugin configuration on a fixture, with a cgroup root of
// its own, and the fixture's topology, for benchmarks that call the
// handlers directly.
func benchNode(tb testing.TB, node testNode) (*config.Config, *sysfs.Topology) {
	cfg, err := config.Parse(strings.NewReader(node.config), "bench")
	require.NoError(tb, err)
	cfg.SysfsRoot = fixture.Root(tb, node.fixture)
	cfg.CgroupRoot = tb.TempDir()
	cfg.StateFile = filepath.Join(tb.TempDir(), "state.json") // never the default state directory
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(tb, err)
	return cfg, topo
}
