//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cpupool/nri-cpupool/state"
)

// testUpgradeKeepsPinning replaces the plugin's binary under running
// containers, as a package upgrade or an operator does: the previous release
// runs and pins containers, stops (SIGTERM, as systemd's restart sends), and
// this build starts from the same state file. No container may move, and the
// state file is rewritten in this build's schema.
func testUpgradeKeepsPinning(c *tc) {
	previous := os.Getenv("E2E_PLUGIN_PREVIOUS")
	if previous == "" {
		c.Skipf("no previous release to upgrade from: %s", envOr("E2E_PLUGIN_PREVIOUS_SKIP", "E2E_PLUGIN_PREVIOUS is not set (make e2e builds it from git)"))
	}
	if !strings.HasPrefix(c.e.rt.Name(), "containerd 2.4") {
		c.Skipf("the previous release was made for containerd 2.4; this is %s", c.e.rt.Name())
	}
	p := c.startPluginBinary(previous, c.exclusiveConfig())
	web, app, dpdk, fwd := c.exclusivePods()
	before := map[string]string{
		"infra container":     c.cpus(web, app),
		"exclusive container": c.cpus(dpdk, fwd),
		"web sandbox":         c.sandboxCPUs(web),
		"dpdk sandbox":        c.sandboxCPUs(dpdk),
		"exclusive mems":      c.mems(dpdk, fwd),
	}
	p.stop()

	// The upgrade: the same paths, the new binary.
	p.bin = ""
	p.start(c)
	after := map[string]string{
		"infra container":     c.cpus(web, app),
		"exclusive container": c.cpus(dpdk, fwd),
		"web sandbox":         c.sandboxCPUs(web),
		"dpdk sandbox":        c.sandboxCPUs(dpdk),
		"exclusive mems":      c.mems(dpdk, fwd),
	}
	for what, was := range before {
		c.equal("after the upgrade: "+what, after[what], was)
	}
	c.equal("after the upgrade: the exclusive process", c.allowedOf(fwd), c.last())
	c.wantMetric(`cpupool_containers{pool="exclusive"}`, 1)
	c.wantMetric(`cpupool_containers{pool="infra"}`, 1)
	next := c.runPod(podSpec{name: "next", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	if _, err := c.create(next, "c", 1000); err == nil {
		c.Error("after the upgrade the exclusive CPU was handed out again")
	}
	// The state is migrated, not moved aside.
	c.eventually("the state file in this build's schema", func() (string, bool) {
		data, err := os.ReadFile(p.state)
		if err != nil {
			return err.Error(), false
		}
		var env struct {
			SchemaVersion int `json:"schemaVersion"`
		}
		if err := json.Unmarshal(data, &env); err != nil {
			return err.Error(), false
		}
		return string(data[:min(len(data), 80)]), env.SchemaVersion == state.SchemaVersion
	})
	aside, _ := filepath.Glob(p.state + ".corrupt-*")
	c.equal("no state file moved aside", fmt.Sprint(len(aside)), "0")
}

// startPluginBinary starts another build of the plugin (the previous
// release). That build predates the synchronization metric, so its
// "synchronized" log line is the signal here: a released binary's log
// wording no longer changes.
func (c *tc) startPluginBinary(bin, config string) *pluginProc {
	c.Helper()
	p := &pluginProc{bin: bin}
	c.preparePlugin(p, config)
	p.launch(c)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if log, _ := os.ReadFile(p.log); strings.Contains(string(log), "synchronized") {
			return p
		}
		if !p.alive() || time.Now().After(deadline) {
			c.Fatalf("the previous release did not synchronize:\n%s", tail(p.log, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
