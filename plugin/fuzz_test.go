package plugin

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// FuzzStateSynchronize feeds any state content (in a valid envelope, so
// that the checksum does not stop it at the door) and any runtime cpuset
// through Load and Synchronize: never a panic, and afterwards no two
// exclusive containers share a CPU, every CPU is the node's, every running
// container is placed, and the state file is valid.
func FuzzStateSynchronize(f *testing.F) {
	f.Add([]byte(`{"containers":{"c1":{"podUID":"u","podNamespace":"telco","podName":"p","container":"a","pool":"exclusive","milliCPU":2000,"cpus":"4,12","mems":"0"}}}`), "4,12", "5,13")
	f.Add([]byte(`{"containers":{"c1":{"podUID":"u","podNamespace":"telco","podName":"p","container":"a","pool":"exclusive","milliCPU":2000,"cpus":"4,300","reserved":"1000","mems":"0"}},"previous":{"u/x":"5,4000"}}`), "4,300", "")
	f.Add([]byte(`{"containers":{"c1":{"pool":"exclusive","milliCPU":9223372036854775807,"cpus":"0-9223372036854775807"},"c2":{"pool":"infra","cpus":"4,12"}}}`), "", "0-15")
	f.Add([]byte(`{"containers":{"c2":{"pool":"exclusive-non-isolcpus","milliCPU":1000,"cpus":"1"},"c1":{"pool":"exclusive-non-isolcpus","milliCPU":1000,"cpus":"1"}}}`), "1", "1")
	f.Add([]byte(`{}`), "+1", "0-3000000")
	root := fixture.Root(f, "desktop-8c16t")
	topo, err := sysfs.Discover(root)
	if err != nil {
		f.Fatal(err)
	}
	// Not f.TempDir: a FileStore prepares its next temporary file in the
	// background after a save, and may do so after Close.
	dir, err := os.MkdirTemp("", "fuzz-state-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	f.Fuzz(func(t *testing.T, payload []byte, cpus1, cpus2 string) {
		path := filepath.Join(dir, "state.json")
		data, err := state.EncodeEnvelope(nil, payload, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(strings.NewReader(desktop.config), "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		cfg.SysfsRoot, cfg.CgroupRoot, cfg.StateFile = root, filepath.Join(dir, "cgroup"), path
		log := logrus.New()
		log.SetOutput(io.Discard)
		store := state.NewFileStore(path)
		p, err := New(cfg, topo, store, log)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pod := &api.PodSandbox{Id: "sb", Uid: "u", Name: "p", Namespace: "telco", Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
		ctr := func(id, name, cpus string) *api.Container {
			return &api.Container{Id: id, PodSandboxId: "sb", Name: name, State: api.ContainerState_CONTAINER_RUNNING,
				Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus, Shares: api.UInt64(2048)}}}}
		}
		ctrs := []*api.Container{ctr("c1", "a", cpus1), ctr("c2", "b", cpus2)}
		if _, err := p.Synchronize(context.Background(), []*api.PodSandbox{pod}, ctrs); err != nil {
			return // the state could not be saved; nothing was decided
		}
		owner := map[int]string{}
		for _, a := range p.alloc.Assignments() {
			if !p.alloc.Absent(a.Held()).IsEmpty() {
				t.Fatalf("%s holds CPUs the node lacks: %s", a.ID, a.Held())
			}
			if !pools.IsExclusive(a.Pool) {
				continue
			}
			for _, c := range a.Held().List() {
				if o, ok := owner[c]; ok {
					t.Fatalf("CPU %d held by %s and %s", c, o, a.ID)
				}
				owner[c] = a.ID
			}
		}
		for _, c := range ctrs {
			if _, ok := p.alloc.Get(c.GetId()); !ok {
				t.Fatalf("running container %s left unplaced", c.GetId())
			}
		}
		// The writer persists in the background: a state moved aside as
		// corrupt is replaced by its first write, which Flush waits for.
		if err := p.Flush(); err != nil {
			t.Fatalf("writing the state after Synchronize: %v", err)
		}
		if _, err := state.ReadState(path); err != nil {
			t.Fatalf("state after Synchronize: %v", err)
		}
	})
}
