package plugin

// Tests of the plugin's handlers called directly, without a runtime, for
// what a runtime cannot provoke (a failing disk) or need not (Configure's
// checks).

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// failingStore loses the disk after the first write.
type failingStore struct{ saves int }

func (f *failingStore) Load() (*State, error) { return NewState(), nil }

func (f *failingStore) Close() {}

func (f *failingStore) Save(*State) error {
	f.saves++
	if f.saves > 1 {
		return errors.New("disk full")
	}
	return nil
}

func newUnitPlugin(t *testing.T, store Store, yaml string) *Plugin {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(yaml), "test")
	require.NoError(t, err)
	cfg.SysfsRoot = fixture.Root(t, "desktop-8c16t")
	cfg.CgroupRoot = t.TempDir()
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.ErrorLevel)
	p, err := New(cfg, topo, store, log)
	require.NoError(t, err)
	return p
}

func TestCreateRefusedWhenStateCannotBeSaved(t *testing.T) {
	store := &failingStore{}
	p := newUnitPlugin(t, store, `isolatedCPUs: "4-7,12-15"`)
	ctx := context.Background()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)
	pod := &api.PodSandbox{Id: "sb", Name: "p", Uid: "u", Namespace: "ns", Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
	ctr := &api.Container{Id: "c1", Name: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(8192)}}}}
	_, _, err = p.CreateContainer(ctx, pod, ctr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
	assert.Empty(t, p.alloc.Assignments(), "the allocation is rolled back")
	assert.Equal(t, 8, p.alloc.FreeCPUs("exclusive").Size())
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
	assert.ErrorContains(t, err, "CPUs 99 do not exist")
	assert.Equal(t, "6-7,14-15", p.alloc.Layout().Exclusive.String(), "a refused config changes nothing")
}

// TestSynchronizeMigratesPreviousCPUs: a state file from before holds
// remembered stopped containers' CPUs as "previous"; those of pods that
// still exist become holds, the others are forgotten.
func TestSynchronizeMigratesPreviousCPUs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	store := NewFileStore(path)
	st := NewState()
	st.Previous["uid-gone/c"] = "4,12"
	st.Previous["uid-here/c"] = "5,13"
	require.NoError(t, store.Save(st))
	p := newUnitPlugin(t, store, `isolatedCPUs: "4-7,12-15"`)
	_, err := p.Synchronize(context.Background(), []*api.PodSandbox{{Id: "sb", Uid: "uid-here", Name: "here", Namespace: "ns"}}, nil)
	require.NoError(t, err)
	back, err := ReadState(path)
	require.NoError(t, err)
	assert.Empty(t, back.Previous, "no longer written")
	require.Len(t, back.Held, 1)
	assert.Equal(t, "5,13", back.Held["uid-here/c"].CPUs)
	assert.Equal(t, "exclusive", back.Held["uid-here/c"].Pool)
}
