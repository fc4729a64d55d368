package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
)

// afterEncodeFailingStore is a FileStore whose next save fails before
// encoding (failBefore) or after it (failAfter: the state is encoded, then
// the directory cannot be made), for the writer's tracked mirror
// (State.TrackContainerChanges) to meet both.
type afterEncodeFailingStore struct {
	*state.FileStore
	failBefore, failAfter     atomic.Bool
	failedBefore, failedAfter atomic.Int64
}

func (s *afterEncodeFailingStore) Save(st *state.State) error {
	if s.failBefore.Swap(false) {
		s.failedBefore.Add(1)
		return errors.New("disk full")
	}
	if s.failAfter.Swap(false) {
		path := s.Path
		s.FileStore.Close() // waits for the spare file's goroutine, which reads Path
		s.Path = "/dev/null/state.json"
		err := s.FileStore.Save(st)
		s.Path = path
		s.failedAfter.Add(1)
		if err == nil {
			return errors.New("the save meant to fail after its encode succeeded")
		}
		return err
	}
	return s.FileStore.Save(st)
}

// TestStateFileIsMemoryAtRandom: whatever the plugin does between two
// writes (creations, stops and removals that move other containers, a
// Synchronize that remakes its memory, a reload, saves that fail before or
// after encoding), the state file, written from the writer's tracked
// mirror, holds exactly the plugin's memory of containers once flushed.
func TestStateFileIsMemoryAtRandom(t *testing.T) {
	path := t.TempDir() + "/state.json"
	store := &afterEncodeFailingStore{FileStore: state.NewFileStore(path)}
	layouts := []string{`isolatedCPUs: "4-7,12-15"`, `isolatedCPUs: "2-7,10-15"`}
	p := newUnitPlugin(t, store, layouts[0])
	p.log.SetLevel(logrus.FatalLevel) // failed saves are expected
	ctx := context.Background()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)

	type running struct {
		pod *api.PodSandbox
		ctr *api.Container
	}
	var live []running
	reloads := 0
	r := rand.New(rand.NewSource(45))
	compare := func(step int) {
		store.failBefore.Store(false) // armed for a write that had nothing to do
		store.failAfter.Store(false)
		require.NoError(t, p.Flush(), "step %d", step)
		onDisk, err := state.ReadState(path)
		require.NoError(t, err, "step %d", step)
		p.mu.Lock()
		want := maps.Clone(p.memory.Containers)
		p.mu.Unlock()
		require.Equal(t, want, onDisk.Containers, "step %d: the file is not the plugin's memory", step)
	}
	for step := range 400 {
		switch k := r.Intn(20); {
		case k < 9:
			i := step
			pod := &api.PodSandbox{Id: fmt.Sprint("sb", i), Name: fmt.Sprint("p", i), Uid: fmt.Sprint("u", i), Namespace: "ns"}
			if r.Intn(2) == 0 {
				pod.Annotations = map[string]string{"pool.cpupool.dev": "exclusive"}
			}
			ctr := &api.Container{Id: fmt.Sprint("c", i), PodSandboxId: pod.Id, Name: "c",
				Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(uint64(1024 * (1 + r.Intn(2))))}}}}
			if _, _, err := p.CreateContainer(ctx, pod, ctr); err == nil {
				live = append(live, running{pod, ctr})
			}
		case k < 15 && len(live) > 0:
			i := r.Intn(len(live))
			c := live[i]
			_, err := p.StopContainer(ctx, c.pod, c.ctr)
			require.NoError(t, err)
			require.NoError(t, p.RemoveContainer(ctx, c.pod, c.ctr))
			require.NoError(t, p.RemovePodSandbox(ctx, c.pod))
			live = append(live[:i], live[i+1:]...)
		case k == 15:
			var pods []*api.PodSandbox
			var ctrs []*api.Container
			for _, c := range live {
				if r.Intn(8) == 0 {
					continue // gone while the runtime restarted
				}
				pods, ctrs = append(pods, c.pod), append(ctrs, c.ctr)
			}
			_, err := p.Synchronize(ctx, pods, ctrs)
			require.NoError(t, err)
			kept := map[string]bool{}
			for _, c := range ctrs {
				kept[c.Id] = true
			}
			live = slices.DeleteFunc(live, func(c running) bool { return !kept[c.ctr.Id] })
		case k == 16:
			cfg, err := config.Parse(strings.NewReader(layouts[r.Intn(len(layouts))]), "test")
			require.NoError(t, err)
			cfg.SysfsRoot, cfg.CgroupRoot, cfg.StateFile = p.cfg.SysfsRoot, p.cfg.CgroupRoot, p.cfg.StateFile
			if p.Reload(cfg, nil, "test") == nil { // refused while containers sit where the new layout moves a pool: fine
				reloads++
			}
		case k == 17:
			store.failBefore.Store(true)
			_ = p.Flush()
		case k == 18:
			store.failAfter.Store(true)
			_ = p.Flush()
		default:
			compare(step)
		}
	}
	compare(-1)
	require.Positive(t, store.failedBefore.Load(), "no save failed before its encode: the test shows nothing of it")
	require.Positive(t, store.failedAfter.Load(), "no save failed after its encode: the test shows nothing of it")
	require.Positive(t, reloads, "no reload applied: the test shows nothing of it")
	t.Logf("%d saves failed before their encode, %d after; %d reloads applied", store.failedBefore.Load(), store.failedAfter.Load(), reloads)
}
