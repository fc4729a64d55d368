//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerd is a private containerd 2.x (facts: shared/RUNTIME-NOTES.md):
// config version 3 with every path in dir, NRI on, cgroupfs, runc built
// with seccomp, the test image pinned as the sandbox image. Its config
// imports DropInDir()/*.toml, as a node's /etc/containerd/config.toml
// that imports /etc/containerd/conf.d does (the line docs/install.md asks
// for; `containerd config default` writes it in v2.4.2, not in v2.0.13):
// a drop-in copied there is read at the next (re)start the way a node
// reads it, merged into the tables the config sets. With the directory
// empty, as in every scenario but the fail-closed one, the import reads
// nothing (an empty glob is no error, v2.0.13 included).
type containerd struct {
	bin, version, runc, dir, image, imageTar string
	d                                        daemon
}

func newContainerd(bin, version, runc, dir, image, imageTar string) *containerd {
	return &containerd{bin: bin, version: version, runc: runc, dir: dir, image: image, imageTar: imageTar}
}

func (c *containerd) Name() string                                    { return "containerd " + c.version }
func (c *containerd) CRISocket() string                               { return filepath.Join(c.dir, "containerd.sock") }
func (c *containerd) NRISocket() string                               { return filepath.Join(c.dir, "nri.sock") }
func (c *containerd) CgroupsPath(parent, id string) string            { return parent + "/" + id }
func (c *containerd) HasInfraContainer(runtimeapi.NamespaceMode) bool { return true }
func (c *containerd) LogTail() string                                 { return tail(c.d.log, 25) }

// DropInDir is the directory whose *.toml files the config imports.
func (c *containerd) DropInDir() string { return filepath.Join(c.dir, "conf.d") }

func (c *containerd) writeConfig(t testing.TB) {
	t.Helper()
	config := fmt.Sprintf(`version = 3
imports = ["%[4]s/*.toml"]
root = "%[1]s/root"
state = "%[1]s/state"
[grpc]
  address = "%[1]s/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd.sock.ttrpc"
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "%[1]s/nri.sock"
  plugin_path = "%[1]s/nri-plugins"
  plugin_config_path = "%[1]s/nri-conf"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  # Its own, which containerd makes at start: not the host's /etc/cni
  # (the pods here use the host's network).
  conf_dir = "%[1]s/cni/net.d"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "%[2]s"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "%[3]s"
`, c.dir, c.runc, c.image, c.DropInDir())
	mustWrite(t, filepath.Join(c.dir, "containerd.toml"), config)
}

func (c *containerd) Start(t testing.TB) {
	t.Helper()
	c.writeConfig(t)
	for _, d := range []string{"nri-plugins", "nri-conf", "conf.d"} {
		os.MkdirAll(filepath.Join(c.dir, d), 0o755)
	}
	bin := filepath.Dir(c.bin)
	c.d = daemon{argv: []string{c.bin, "--config", filepath.Join(c.dir, "containerd.toml")}, log: filepath.Join(c.dir, "containerd.log"),
		// The shim is found next to containerd; the shim finds nothing else
		// through PATH (runc is named in the config).
		env: []string{"PATH=" + bin + ":" + os.Getenv("PATH")}}
	c.d.start(t, c.CRISocket())
	run(t, nil, filepath.Join(bin, "ctr"), "--address", c.CRISocket(), "-n", "k8s.io", "images", "import", c.imageTar)
}

func (c *containerd) Restart(t testing.TB) {
	t.Helper()
	c.writeConfig(t)
	c.d.stop()
	c.d.start(t, c.CRISocket())
}

func (c *containerd) Stop() { c.d.stop() }
