package plugin

// Tests of the plugin's handlers called directly, without a runtime, for
// what a runtime cannot provoke (a failing disk) or need not (Configure's
// checks).

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// failingStore is a disk that fails while broken and keeps a copy of the
// last state it was given.
type failingStore struct {
	mu     sync.Mutex
	broken bool
	saved  *state.State
}

func (f *failingStore) Load() (*state.State, error) { return state.NewState(), nil }

func (f *failingStore) Close() {}

func (f *failingStore) Sync() error { return nil }

func (f *failingStore) Save(st *state.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return errors.New("disk full")
	}
	cp := *st
	cp.Containers = maps.Clone(st.Containers)
	f.saved = &cp
	return nil
}

func (f *failingStore) setBroken(b bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = b
}

func (f *failingStore) containers() map[string]state.ContainerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.saved == nil {
		return nil
	}
	return f.saved.Containers
}

func newUnitPlugin(t *testing.T, store state.Store, yaml string) *Plugin {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(yaml), "test")
	require.NoError(t, err)
	cfg.SysfsRoot = fixture.Root(t, "desktop-8c16t")
	cfg.CgroupRoot = t.TempDir()
	// Never the default /var/lib/nri-cpupool: the status file, the
	// journal and the lock lie beside the state file, whatever the store.
	cfg.StateFile = filepath.Join(t.TempDir(), "state.json")
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.ErrorLevel)
	p, err := New(cfg, topo, store, log)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// TestCreateSucceedsWhileStateCannotBeSaved: a disk that refuses the state
// write no longer refuses containers; the failure is counted and the write
// retried until it succeeds.
func TestCreateSucceedsWhileStateCannotBeSaved(t *testing.T) {
	store := &failingStore{}
	p := newUnitPlugin(t, store, `isolatedCPUs: "4-7,12-15"`)
	p.log.SetLevel(logrus.FatalLevel) // the failures are expected
	ctx := context.Background()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)
	require.NoError(t, p.Flush())
	store.setBroken(true)

	pod := &api.PodSandbox{Id: "sb", Name: "p", Uid: "u", Namespace: "ns", Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
	ctr := &api.Container{Id: "c1", Name: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(8192)}}}}
	adj, _, err := p.CreateContainer(ctx, pod, ctr)
	require.NoError(t, err, "a broken disk does not refuse the container")
	assert.Equal(t, "4-7,12-15", adj.GetLinux().GetResources().GetCpu().GetCpus())
	assert.Equal(t, 0, p.alloc.FreeCPUs("exclusive").Size(), "the CPUs are held")

	errorsTotal := func() float64 {
		return testutil.ToFloat64(metricNamed{p.metrics, "cpupool_state_write_errors_total"})
	}
	require.Eventually(t, func() bool { return errorsTotal() >= 2 }, 5*time.Second, time.Millisecond, "failures are counted and retried")
	assert.Empty(t, store.containers(), "nothing written while the disk is broken")
	assert.Error(t, p.Flush(), "a flush reports the failure")
	assert.Positive(t, testutil.ToFloat64(metricNamed{p.metrics, "cpupool_state_behind_seconds"}), "the file is behind")

	store.setBroken(false)
	require.Eventually(t, func() bool { _, ok := store.containers()["c1"]; return ok }, 10*time.Second, time.Millisecond, "a retry writes the state")
	require.NoError(t, p.Flush(), "waits for the retry to finish; nothing is left to write")
	assert.Equal(t, "4-7,12-15", store.containers()["c1"].CPUs)
	failures := errorsTotal()
	time.Sleep(3 * stateWriteBackoff.Initial)
	assert.Equal(t, failures, errorsTotal(), "no more attempts once written")
	assert.Zero(t, testutil.ToFloat64(metricNamed{p.metrics, "cpupool_state_behind_seconds"}), "the file is current")
	assert.Less(t, testutil.ToFloat64(metricNamed{p.metrics, "cpupool_state_last_write_age_seconds"}), 5.0)
}

// metricNamed is one metric of a collector, by name.
type metricNamed struct {
	c    prometheus.Collector
	name string
}

func (f metricNamed) Describe(ch chan<- *prometheus.Desc) { f.c.Describe(ch) }

func (f metricNamed) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 64)
	go func() { f.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}

func TestConfigureFromRuntime(t *testing.T) {
	p := newUnitPlugin(t, &failingStore{}, "")
	ctx := context.Background()
	mask, err := p.Configure(ctx, "isolatedCPUs: \"6-7,14-15\"\n", "containerd", "v2.4.2")
	require.NoError(t, err)
	assert.True(t, mask.IsSet(api.Event_CREATE_CONTAINER))
	assert.False(t, mask.IsSet(api.Event_START_CONTAINER), "only used events are subscribed")
	assert.Equal(t, "6-7,14-15", p.alloc.Layout().Exclusive.String())

	_, err = p.Configure(ctx, "pools: {exclusiv: {}}", "containerd", "v2.4.2")
	assert.ErrorContains(t, err, "exclusiv")
	_, err = p.Configure(ctx, "isolatedCPUs: \"99\"", "containerd", "v2.4.2")
	assert.ErrorContains(t, err, "CPU 99 does not exist")
	assert.Equal(t, "6-7,14-15", p.alloc.Layout().Exclusive.String(), "a refused config changes nothing")
}
