//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCRIO(t *testing.T) {
	dir := os.Getenv("E2E_CRIO")
	if dir == "" {
		t.Skip("CRI-O not found: " + envOr("E2E_CRIO_SKIP", "E2E_CRIO is not set (make e2e sets it from NRI_CPUPOOL_CRIO_DIR)"))
	}
	runSuite(t, func(wd, tar string) Runtime { return newCRIO(dir, runcPath(t), wd, tar) })
}

// crio is a private CRI-O (facts: shared/RUNTIME-NOTES.md, section CRI-O):
// no file under /etc is read, every path is below dir, cgroupfs, NRI on,
// the test image imported with copyimg before it starts and used as the
// pause image. Its runtime is a wrapper around runc that lifts the pause
// container's negative oomScoreAdj (there is no CAP_SYS_RESOURCE here and
// no CRI-O setting like containerd's restrict_oom_score_adj).
type crio struct {
	bin, runc, dir, imageTar string
	version                  string
	d                        daemon
}

func newCRIO(bin, runc, dir, imageTar string) *crio {
	c := &crio{bin: bin, runc: runc, dir: dir, imageTar: imageTar, version: "v1.36.3"}
	if out, err := exec.Command(filepath.Join(bin, "crio"), "--version").Output(); err == nil {
		if m := regexp.MustCompile(`crio version (\S+)`).FindSubmatch(out); m != nil {
			c.version = "v" + string(m[1])
		}
	}
	return c
}

func (c *crio) Name() string                         { return "CRI-O " + c.version }
func (c *crio) CRISocket() string                    { return filepath.Join(c.dir, "crio.sock") }
func (c *crio) NRISocket() string                    { return filepath.Join(c.dir, "nri.sock") }
func (c *crio) CgroupsPath(parent, id string) string { return parent + "/crio-" + id }
func (c *crio) LogTail() string                      { return tail(c.d.log, 25) }

// HasInfraContainer: with drop_infra_ctr (the default) only pods sharing
// one PID namespace get an infra process.
func (c *crio) HasInfraContainer(pid runtimeapi.NamespaceMode) bool {
	return pid == runtimeapi.NamespaceMode_POD
}

const runcWrapper = `#!/bin/sh
# Lifts a negative oomScoreAdj (CRI-O gives -998 to pause containers) before
# runc applies it: this machine has no CAP_SYS_RESOURCE.
prev=""
for a in "$@"; do
	case "$prev" in --bundle|-b) bundle=$a ;; esac
	case "$a" in --bundle=*) bundle=${a#--bundle=} ;; esac
	prev=$a
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
	sed -i 's/"oomScoreAdj":[ ]*-[0-9]*/"oomScoreAdj":0/' "$bundle/config.json"
fi
exec %s "$@"
`

func (c *crio) Start(t testing.TB) {
	t.Helper()
	w := c.dir
	for _, d := range []string{"empty", "cni-conf", "cni-bin", "hooks", "cdi", "keys", "auth", "nri-plugins", "nri-conf", "logs", "blobcache"} {
		os.MkdirAll(filepath.Join(w, d), 0o755)
	}
	mustWrite(t, filepath.Join(w, "policy.json"), `{"default":[{"type":"insecureAcceptAnything"}]}`)
	mustWrite(t, filepath.Join(w, "runc-wrapper"), fmt.Sprintf(runcWrapper, c.runc))
	os.Chmod(filepath.Join(w, "runc-wrapper"), 0o755)
	config := fmt.Sprintf(`[crio]
root = "%[1]s/storage"
runroot = "%[1]s/run/storage"
storage_driver = "overlay"
log_dir = "%[1]s/logs"
version_file = "%[1]s/run/version"
version_file_persist = "%[1]s/lib/version"
clean_shutdown_file = "%[1]s/lib/clean.shutdown"

[crio.api]
listen = "%[1]s/crio.sock"

[crio.runtime]
cgroup_manager = "cgroupfs"
default_runtime = "runc"
pinns_path = "%[2]s/pinns"
namespaces_dir = "%[1]s/ns"
container_exits_dir = "%[1]s/exits"
container_attach_socket_dir = "%[1]s/attach"
hooks_dir = ["%[1]s/hooks"]
cdi_spec_dirs = ["%[1]s/cdi"]
decryption_keys_path = "%[1]s/keys"
irqbalance_config_restore_file = "disable"
# No iptables or nftables here, and host-network pods need no port mapping.
disable_hostport_mapping = true

[crio.runtime.runtimes.runc]
runtime_path = "%[1]s/runc-wrapper"
runtime_root = "%[1]s/runc-root"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"

[crio.image]
pause_image = "%[3]s"
pause_command = ""
signature_policy = "%[1]s/policy.json"
signature_policy_dir = "%[1]s/policies"
namespaced_auth_dir = "%[1]s/auth"

[crio.network]
network_dir = "%[1]s/cni-conf"
plugin_dirs = ["%[1]s/cni-bin"]

[crio.nri]
enable_nri = true
nri_listen = "%[1]s/nri.sock"
nri_plugin_dir = "%[1]s/nri-plugins"
nri_plugin_config_dir = "%[1]s/nri-conf"
`, w, c.bin, image)
	mustWrite(t, filepath.Join(w, "crio.conf"), config)
	storageEnv := []string{"CONTAINERS_STORAGE_CONF=/dev/null"}
	run(t, storageEnv, filepath.Join(c.bin, "copyimg"), "--root", w+"/storage", "--runroot", w+"/run/storage", "--storage-driver", "overlay",
		"--signature-policy", w+"/policy.json", "--blob-info-cache-dir", w+"/blobcache", "--image-name", image, "--import-from", "oci-archive:"+c.imageTar)
	c.d = daemon{argv: []string{filepath.Join(c.bin, "crio"), "--config", w + "/crio.conf", "--config-dir", w + "/empty"},
		env: storageEnv, log: filepath.Join(w, "crio.log")}
	c.d.start(t, c.CRISocket())
}

func (c *crio) Restart(t testing.TB) {
	t.Helper()
	c.d.stop()
	c.d.start(t, c.CRISocket())
}

func (c *crio) Stop() { c.d.stop() }
