package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

func TestFileStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	s := NewFileStore(path)
	st, err := s.Load()
	require.NoError(t, err, "a missing file is an empty state")
	assert.Empty(t, st.Containers)

	st.Containers["abc"] = ContainerState{PodUID: "u", PodNamespace: "ns", PodName: "p", Container: "c", Pool: "exclusive", CPUs: "2-3", Mems: "0", MilliCPU: 2000}
	st.Previous["u/c"] = "4-5"
	require.NoError(t, s.Save(st))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.Eventually(t, func() bool { return len(s.spare) == 1 }, 5*time.Second, time.Millisecond, "a spare file is prepared")
	require.NoError(t, s.Save(st), "saving through the spare")
	require.Eventually(t, func() bool { return len(s.spare) == 1 }, 5*time.Second, time.Millisecond)
	s.Close()
	leftovers, _ := filepath.Glob(path + ".tmp-*")
	assert.Empty(t, leftovers, "no temporary file left behind")

	back, err := s.Load()
	require.NoError(t, err)
	assert.Equal(t, st, back)

	raw, _ := os.ReadFile(path)
	assert.Contains(t, string(raw), `"schemaVersion":1`)
	assert.Contains(t, string(raw), `"checksum":"sha256:`)
}

func TestFileStoreRemovesStaleTemporaryFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path+".tmp-123", []byte("half a write"), 0o600))
	s := NewFileStore(path)
	_, err := s.Load()
	require.NoError(t, err)
	leftovers, _ := filepath.Glob(path + ".tmp-*")
	assert.Empty(t, leftovers)
}

func TestFileStoreDiscardsBadFiles(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":      "nope",
		"wrong schema": `{"schemaVersion":2,"checksum":"","state":{}}`,
		"bad checksum": `{"schemaVersion":1,"checksum":"sha256:00","state":{"containers":{}}}`,
		"unknown field in state": func() string {
			payload := `{"containers":{},"surprise":1}`
			return `{"schemaVersion":1,"checksum":"` + checksum([]byte(payload)) + `","state":` + payload + `}`
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			s := NewFileStore(path)
			s.now = func() time.Time { return time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC) }
			st, err := s.Load()
			require.ErrorIs(t, err, ErrStateDiscarded)
			assert.Contains(t, err.Error(), "moved to "+path+".corrupt-20261130T010203")
			assert.Empty(t, st.Containers)
			_, err = os.Stat(path)
			assert.True(t, os.IsNotExist(err))
			aside, _ := filepath.Glob(path + ".corrupt-*")
			require.Len(t, aside, 1)
			kept, _ := os.ReadFile(aside[0])
			assert.Equal(t, content, string(kept), "the bad file is kept as it was")
		})
	}
}

// failingStore loses the disk after the first write.
type failingStore struct{ saves int }

func (f *failingStore) Load() (*State, error) { return NewState(), nil }
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

func TestMilliCPUAndQoS(t *testing.T) {
	ctr := func(cpu *api.LinuxCPU) *api.Container {
		return &api.Container{Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
	}
	assert.Equal(t, int64(1500), milliCPU(ctr(&api.LinuxCPU{Shares: api.UInt64(1536)})))
	assert.Equal(t, int64(100), milliCPU(ctr(&api.LinuxCPU{Shares: api.UInt64(102)})))
	assert.Equal(t, int64(0), milliCPU(ctr(&api.LinuxCPU{Shares: api.UInt64(2)})), "besteffort")
	assert.Equal(t, int64(2500), milliCPU(ctr(&api.LinuxCPU{Quota: api.Int64(250000), Period: api.UInt64(100000)})), "limit without shares")
	assert.Equal(t, int64(0), milliCPU(&api.Container{}))
	// Finding 8: values no kernel accepts must not overflow into a small or
	// negative request.
	for _, cpu := range []*api.LinuxCPU{
		{Shares: api.UInt64(uint64(math.MaxUint64))},
		{Shares: api.UInt64(math.MaxInt64)},
		{Quota: api.Int64(math.MaxInt64), Period: api.UInt64(100000)},
		{Quota: api.Int64(math.MaxInt64), Period: api.UInt64(uint64(math.MaxUint64))},
		{Quota: api.Int64(math.MaxInt64), Period: api.UInt64(1)},
	} {
		m := milliCPU(ctr(cpu))
		assert.True(t, m == 0 || m >= 64000, "%v: %d", cpu, m)
	}

	pod := func(parent string) *api.PodSandbox {
		return &api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: parent}}
	}
	assert.Equal(t, "guaranteed", qosClass(pod("/kubepods/podabc")))
	assert.Equal(t, "burstable", qosClass(pod("/kubepods/burstable/podabc")))
	assert.Equal(t, "besteffort", qosClass(pod("kubepods-besteffort-podabc.slice")))
	assert.Equal(t, "", qosClass(pod("")))
}

func TestCgroupDir(t *testing.T) {
	for in, want := range map[string]string{
		"/kubepods/burstable/pod1/abc":                        "/kubepods/burstable/pod1/abc",
		"kubepods/pod1/abc":                                   "/kubepods/pod1/abc",
		"kubepods-burstable-pod1.slice:cri-containerd:abc":    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope",
		"system.slice:crio:abc":                               "/system.slice/crio-abc.scope",
		"kubepods-pod1.slice:crio:kubepods-pod1-conmon.slice": "/kubepods.slice/kubepods-pod1.slice/kubepods-pod1-conmon.slice",
	} {
		got, err := cgroupDir(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := cgroupDir("bad-.slice:x:y")
	assert.Error(t, err)
	_, err = cgroupDir("")
	assert.ErrorIs(t, err, errNoCgroup)
}

// TestIncrementalEncodingMatchesJSON keeps the cached encoder byte-for-byte
// equal to encoding/json across changes, additions and removals.
func TestIncrementalEncodingMatchesJSON(t *testing.T) {
	var enc stateEncoder
	st := NewState()
	for step := 0; step < 50; step++ {
		id := fmt.Sprintf("c%02d", step%17)
		if step%5 == 4 {
			delete(st.Containers, id)
		} else {
			st.Containers[id] = ContainerState{PodUID: "u", PodName: "p\"quoted\"", Container: "c", Pool: "exclusive", CPUs: fmt.Sprint(step), MilliCPU: int64(step)}
		}
		if step%7 == 0 {
			st.Previous["u/c"+id] = fmt.Sprint(step)
		}
		st.Pools["infra"] = fmt.Sprintf("0-%d", step)
		got, err := enc.encode(st)
		require.NoError(t, err)
		want, err := json.Marshal(st)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "step %d", step)
	}
}

func TestSynchronizeForgetsPreviousCPUsOfGonePods(t *testing.T) {
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
	assert.Equal(t, map[string]string{"uid-here/c": "5,13"}, back.Previous)
}
