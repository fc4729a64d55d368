//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// testFailClosed: with the packaged opt-in drop-in
// (packaging/containerd/nri-cpupool-fail-closed.toml, whose settings the
// Helm chart's runtime.failClosed renders too: test/helm.sh) copied as is
// into the directory containerd's config imports, containerd reads it at
// its restart, merges it into the NRI table the config sets (the plugin
// still reaches containerd on the config's socket), and its NRI default
// validator refuses containers the plugin did not process. With the plugin
// stopped a pod's container is refused with a clear error, and a pod that
// tolerates the missing plugin starts; with the plugin back, the container
// is created and pinned, and the tolerated one is pinned by Synchronize.
// The plugin's indexed id matches as well as its name.
func testFailClosed(c *tc) {
	cd, ok := c.e.rt.(*containerd)
	if !ok || !strings.HasPrefix(cd.Name(), "containerd 2.4") {
		c.Skipf("fail closed is tested on containerd 2.4 (NRI's default validator); this is %s", c.e.rt.Name())
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "packaging/containerd/nri-cpupool-fail-closed.toml"))
	if err != nil {
		c.Fatal(err)
	}
	dropIn := string(raw)
	if !strings.Contains(dropIn, "required_plugins = ['cpupool']") {
		c.Fatalf("the drop-in no longer requires 'cpupool':\n%s", dropIn)
	}
	installed := filepath.Join(cd.DropInDir(), "nri-cpupool-fail-closed.toml")
	requiring := func(name string) {
		mustWrite(c, installed, strings.Replace(dropIn, "required_plugins = ['cpupool']", fmt.Sprintf("required_plugins = ['%s']", name), 1))
		cd.Restart(c)
	}
	defer func() { // the other scenarios run fail open
		if err := os.Remove(installed); err != nil {
			c.Error(err)
		}
		cd.Restart(c)
	}()

	requiring("cpupool") // and no plugin runs
	fc := c.runPod(podSpec{name: "fc", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	_, err = c.create(fc, "c", 1000)
	if err == nil {
		c.Fatal("a container started while the required plugin was down")
	}
	for _, want := range []string{"rejected container adjustment", "required plugin", "cpupool", "not present"} {
		c.contains("plugin down: creation refused, naming the plugin", err.Error(), want)
	}
	static := c.runPod(podSpec{name: "static", namespace: "kube-system", qos: "burstable",
		annotations: map[string]string{"tolerate-missing-plugins.nri.io": "true"}})
	sc := c.mustCreate(static, "c", 100)
	c.equal("a pod tolerating the missing plugin starts, unpinned", c.cpus(static, sc), c.e.online.String())

	p := c.startPlugin(c.exclusiveConfig())
	id := c.mustCreate(fc, "c", 1000)
	c.equal("plugin back: the refused container is created and pinned", c.cpus(fc, id), c.last())
	c.wantEventually("plugin back: the tolerated container is pinned by Synchronize", func() string { return c.cpus(static, sc) }, c.infra())
	c.removePod(fc)

	before, err := p.metric("cpupool_runtime_synchronizations_total")
	if err != nil {
		c.Fatal(err)
	}
	requiring("10-cpupool")
	p.waitSynced(c, before)
	idx := c.runPod(podSpec{name: "idx", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	id, err = c.create(idx, "c", 1000)
	if err != nil {
		c.Fatalf("required_plugins = ['10-cpupool'] refused a container the plugin processed: %v", err)
	}
	c.equal("the indexed id matches: created and pinned", c.cpus(idx, id), c.last())
}
