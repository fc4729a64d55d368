package cli

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestStatusAndExplainNameAConfinedContainersPod (review 59b, H1): a
// container created while the daemon was away that Synchronize cannot
// place is confined to infra. status and explain read what the daemon
// wrote: they must name its pod and say why it was confined (explain
// answered "no pod default/away3 in the state", status listed a nameless
// row).
func TestStatusAndExplainNameAConfinedContainersPod(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	cfgFile := writeFile(t, "stateFile: "+stateFile+"\nsysfsRoot: "+root+"\ncgroupRoot: "+dir+"\nprocRoot: "+filepath.Join(dir, "proc")+"\n")
	cfg, err := loadRunConfig(cfgFile)
	require.NoError(t, err)
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err)

	// A pool annotation with a typo: the creation would have been refused.
	pod := &api.PodSandbox{Id: "sandbox-away3", Name: "away3", Namespace: "default", Uid: "uid-away3",
		Annotations: map[string]string{"pool.cpupool.dev": "exclusiv"}}
	ctr := &api.Container{Id: "0123456789abcdef0123", PodSandboxId: pod.Id, Name: "fwd", State: api.ContainerState_CONTAINER_RUNNING}
	_, err = p.Synchronize(context.Background(), []*api.PodSandbox{pod}, []*api.Container{ctr})
	require.NoError(t, err)
	p.Close() // writes the state

	code, out, errOut := run(t, "status", "--config", cfgFile)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `default\s+away3\s+fwd\s+infra`, out, "status names the confined container's pod")

	code, out, errOut = run(t, "explain", "--config", cfgFile, "default/away3")
	require.Equal(t, 0, code, "explain finds the pod: %s", errOut)
	assert.Contains(t, out, "default/away3/fwd: running")
	assert.Contains(t, out, "confined to pool infra when nri-cpupool synchronized with the runtime: ")
	assert.Contains(t, out, "exclusiv")
}
