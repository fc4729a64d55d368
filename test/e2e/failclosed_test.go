//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// testFailClosed: with the packaged opt-in drop-in
// (packaging/containerd/nri-cpupool-fail-closed.toml), containerd's NRI
// default validator refuses containers the plugin did not process. With the
// plugin stopped a pod's container is refused with a clear error, and a pod
// that tolerates the missing plugin starts; with the plugin back, the
// container is created and pinned, and the tolerated one is pinned by
// Synchronize. The plugin's indexed id matches as well as its name.
func testFailClosed(c *tc) {
	cd, ok := c.e.rt.(*containerd)
	if !ok || !strings.HasPrefix(cd.Name(), "containerd 2.4") {
		c.Skipf("fail closed is tested on containerd 2.4 (NRI's default validator); this is %s", c.e.rt.Name())
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "packaging/containerd/nri-cpupool-fail-closed.toml"))
	if err != nil {
		c.Fatal(err)
	}
	// The drop-in's table, appended to this containerd's config as is.
	table := string(raw[strings.Index(string(raw), "[plugins"):])
	if !strings.Contains(table, "required_plugins = ['cpupool']") {
		c.Fatalf("the drop-in no longer requires 'cpupool':\n%s", table)
	}
	requiring := func(name string) {
		cd.extra = "\n" + strings.Replace(table, "required_plugins = ['cpupool']", fmt.Sprintf("required_plugins = ['%s']", name), 1)
		cd.Restart(c)
	}
	defer func() { // the other scenarios run fail open
		cd.extra = ""
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
