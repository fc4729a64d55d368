//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpupool/nri-cpupool/state"
)

// testOverlappingUpgrade is an upgrade whose new process starts before the
// old one is gone (a DaemonSet's maxSurge, a package that starts the new
// unit first), under a storm of container creations. The new process waits
// for the state directory lock, so the runtime never has two plugins of one
// name (it would refuse the containers both pin), and takes over when the
// old one exits. Containers created while neither is registered are pinned
// at the new process's Synchronize. In the end no container is unpinned, no
// creation failed, and the state file has every container.
func testOverlappingUpgrade(c *tc) {
	storm := 200
	if s := os.Getenv("E2E_UPGRADE_STORM"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			c.Fatalf("E2E_UPGRADE_STORM=%q: want a number of containers, at least 10", s)
		}
		storm = n
	}
	old := c.startPlugin(c.exclusiveConfig())
	dpdk := c.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	fwd := c.mustCreate(dpdk, "fwd", 1000)
	c.equal("the exclusive container", c.cpus(dpdk, fwd), c.last())

	// The new process: the same state file and socket, its own log and
	// metrics address.
	next := &pluginProc{state: old.state, socket: old.socket, log: filepath.Join(c.dir, "next.log"), metrics: freeAddr(c)}
	next.cfg = filepath.Join(c.dir, "next.yaml")
	mustWrite(c, next.cfg, c.exclusiveConfig()+fmt.Sprintf("metricsAddress: %q\n", next.metrics))
	next.launch(c)
	c.plugin = next // the scenario's cleanup stops it
	defer old.stop()
	c.eventually("the new process waits for the lock", func() (string, bool) {
		b, _ := os.ReadFile(next.log)
		return tail(next.log, 5), strings.Contains(string(b), "waiting for it to exit")
	})

	const perPod = 20
	var pods []*pod
	for i := 0; i*perPod < storm; i++ {
		pods = append(pods, c.runPod(podSpec{name: fmt.Sprintf("storm%d", i), qos: "burstable"}))
	}
	type created struct {
		pod      *pod
		id, name string
	}
	var (
		mu      sync.Mutex
		ctrs    []created
		failed  []string
		started atomic.Int32
		wg      sync.WaitGroup
	)
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perPod && i*perPod+j < storm; j++ {
				id, err := c.create(p, fmt.Sprintf("c%d", j), 250)
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s/c%d: %v", p.spec.name, j, err))
				} else {
					ctrs = append(ctrs, created{p, id, fmt.Sprintf("c%d", j)})
				}
				mu.Unlock()
				started.Add(1)
			}
		}()
	}
	// The old process goes a quarter into the storm, as systemd or the
	// kubelet stops it.
	for started.Load() < int32(storm/4) {
		time.Sleep(10 * time.Millisecond)
	}
	old.stop()
	wg.Wait()
	next.waitSynced(c, 0)
	c.equal("creations that failed", fmt.Sprint(len(failed)), "0")
	if len(failed) > 0 {
		c.Logf("failed: %s", strings.Join(failed[:min(5, len(failed))], "; "))
	}
	c.contains("the new process says it took over", tail(next.log, 400), "took the state directory lock")

	infra := c.infra()
	var unpinned []created
	deadline := time.Now().Add(10 * time.Second)
	for {
		unpinned = unpinned[:0]
		for _, k := range ctrs {
			if c.cpus(k.pod, k.id) != infra {
				unpinned = append(unpinned, k)
			}
		}
		if len(unpinned) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range unpinned[:min(5, len(unpinned))] {
		name := k.pod.spec.name + "/" + k.name
		rtLogs, _ := filepath.Glob(filepath.Join(c.e.dir, "*.log"))
		var rt []string
		for _, l := range rtLogs {
			rt = append(rt, grepLog(l, k.id, "post-sync", "level=error", "level=warn"))
		}
		c.Errorf("%s (%.12s) runs on %q, not on the infra pool %s; the logs say:\nold: %s\nnew: %s\nruntime: %s", name, k.id, c.cpus(k.pod, k.id), infra,
			grepLog(old.log, name, k.id[:12]), grepLog(next.log, name, k.id[:12]), strings.Join(rt, "\n"))
	}
	c.equal("containers of the storm not on the infra pool", fmt.Sprint(len(unpinned)), "0")
	b, _ := os.ReadFile(next.log)
	var kept, repinned, placed int
	if i := strings.Index(string(b), "synchronized: "); i >= 0 {
		fmt.Sscanf(string(b[i:]), "synchronized: %d containers kept, %d re-pinned, %d placed", &kept, &repinned, &placed)
	}
	c.Logf("the new process's Synchronize placed %d containers created while no plugin was registered; %d were adopted at their start; %d cgroups were pinned after their start",
		placed, strings.Count(string(b), "started without the plugin seeing its creation"), strings.Count(string(b), "started on CPUs"))
	if len(unpinned) > 0 {
		c.Logf("the old process's last lines:\n%s\nthe new process's first lines:\n%s", tail(old.log, 15), grepLog(next.log, "synchroniz", "registered", "lock", "connected"))
	}
	c.equal("the exclusive container did not move", c.cpus(dpdk, fwd), c.last())
	c.eventually("the state file has every container", func() (string, bool) {
		st, err := state.ReadState(next.state)
		if err != nil {
			return err.Error(), false
		}
		var missing []string
		for _, k := range ctrs {
			if _, ok := st.Containers[k.id]; !ok {
				missing = append(missing, fmt.Sprintf("%s/%s %.12s (old: %s; new: %s)", k.pod.spec.name, k.name, k.id,
					grepLog(old.log, k.pod.spec.name+"/"+k.name), grepLog(next.log, k.pod.spec.name+"/"+k.name, k.id[:12])))
			}
		}
		if _, ok := st.Containers[fwd]; !ok {
			missing = append(missing, "the exclusive container")
		}
		return fmt.Sprintf("%d of %d missing: %s", len(missing), len(ctrs)+1, strings.Join(missing[:min(3, len(missing))], "; ")), len(missing) == 0
	})
}

// grepLog is the lines of a log that name any of the needles.
func grepLog(path string, needles ...string) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, n := range needles {
			if strings.Contains(line, n) {
				out = append(out, line)
				break
			}
		}
	}
	if len(out) == 0 {
		return "(nothing)"
	}
	return strings.Join(out, "\n")
}
