//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"
)

// scenarios run, in this order, against every runtime. Each starts its own
// plugin with its own configuration and state file, and removes its pods.
var scenarios = []scenario{
	{"ExclusivePool", 2, testExclusivePool},
	{"SharedPool", 2, testSharedPool},
	{"ExclusiveAndSharedSideBySide", 3, testExclusiveAndShared},
	{"ExclusiveWithSharedCPUs", 3, testExclusiveWithSharedCPUs},
	{"ExclusiveNonIsolcpusInfraShrinksAndGrows", 2, testExclusiveNonIsolcpus},
	{"UpdatesAfterRemovals", 2, testUpdatesAfterRemovals},
	{"FullPoolAndBadAnnotations", 2, testFullPoolAndBadAnnotations},
	{"PluginKill9", 2, testPluginKill9},
	{"RuntimeRestart", 2, testRuntimeRestart},
	{"CorruptStateFile", 2, testCorruptStateFile},
	{"RemovalFreesCPUs", 2, testRemovalFreesCPUs},
	{"UpdateContainerOverride", 2, testUpdateContainerOverride},
	{"ContainerRestartKeepsCPUs", 2, testContainerRestart},
	{"KubeletStylePods", 2, testKubeletStylePods},
	{"PodLifeHoldsExclusiveCPUs", 2, testPodLife},
	{"InPlaceResizeAndCPUQuota", 2, testInPlaceResize},
	{"ResourceRouteInitContainerAndCPUQuota", 2, testResourceRoute},
	{"UpgradeKeepsPinning", 2, testUpgradeKeepsPinning},
	{"OverlappingUpgradeUnderACreateStorm", 2, testOverlappingUpgrade},
	{"FailClosed", 2, testFailClosed},
}

const poolAnnotation = "pool.cpupool.dev"

// exclusiveConfig: the last CPU plays the isolated one and is the exclusive
// pool; the rest is infra.
func (c *tc) exclusiveConfig() string {
	return fmt.Sprintf("isolatedCPUs: \"%d\"\npools:\n  exclusive: {cpus: \"%d\"}\nallowedNamespaces:\n  exclusive: [telco]\n", c.e.last, c.e.last)
}

func (c *tc) last() string  { return fmt.Sprint(c.e.last) }
func (c *tc) infra() string { return c.e.rest.String() }

// nodeOf is the NUMA node of a CPU.
func nodeOf(cpu int) string {
	m, _ := filepath.Glob(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/node*", cpu))
	if len(m) == 0 {
		return "0"
	}
	return strings.TrimPrefix(filepath.Base(m[0]), "node")
}

// checkSandbox checks that a pod's own cgroup (which exists even when the
// runtime runs no infra container) and its infra process, if any, are on want.
// The plugin pins sandboxes in the background, right after its reply: the
// check waits for it.
func (c *tc) checkSandbox(what string, p *pod, want string) {
	c.Helper()
	c.wantEventually(what+": sandbox cgroup", func() string { return c.sandboxCPUs(p) }, want)
	if c.e.rt.HasInfraContainer(p.spec.pid) {
		c.wantEventually(what+": pause process Cpus_allowed_list", func() string { return allowed(c.sandboxPid(p)) }, want)
	}
}

// exclusivePods runs the two pods most scenarios start from: web (no
// annotation: infra) and dpdk (exclusive).
func (c *tc) exclusivePods() (web *pod, app string, dpdk *pod, fwd string) {
	c.Helper()
	web = c.runPod(podSpec{name: "web", qos: "burstable"})
	app = c.mustCreate(web, "app", 500)
	dpdk = c.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	fwd = c.mustCreate(dpdk, "fwd", 1000)
	c.equal("infra container", c.cpus(web, app), c.infra())
	c.equal("exclusive container", c.cpus(dpdk, fwd), c.last())
	return
}

func (c *tc) wantMetric(series string, want float64) {
	c.Helper()
	c.eventually("metric "+series, func() (string, bool) {
		v, err := c.plugin.metric(series)
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprint(v), v == want
	})
}

func testExclusivePool(c *tc) {
	c.startPlugin(c.exclusiveConfig())
	web, app, dpdk, fwd := c.exclusivePods()
	c.equal("infra container Cpus_allowed_list", c.allowedOf(app), c.infra())
	c.checkSandbox("web", web, c.infra())
	c.equal("exclusive container cpuset.mems", c.mems(dpdk, fwd), nodeOf(c.e.last))
	c.equal("exclusive container Cpus_allowed_list", c.allowedOf(fwd), c.last())
	c.checkSandbox("dpdk (exclusive pod)", dpdk, c.infra())
	c.equal("CPUPOOL_CPUS and CPUPOOL_POOL in the container", c.exec(fwd, "/bin/sh", "-c", "echo $CPUPOOL_CPUS:$CPUPOOL_POOL"), c.last()+":exclusive")
	c.wantMetric(`cpupool_pool_free_cpus{pool="exclusive"}`, 0)
	c.wantMetric(`cpupool_containers{pool="exclusive"}`, 1)
	c.wantMetric(`cpupool_containers{pool="infra"}`, 1)
}

func testSharedPool(c *tc) {
	c.startPlugin(fmt.Sprintf("isolatedCPUs: \"%d\"\npools:\n  shared: {cpus: \"%d\"}\n", c.e.last, c.e.last))
	logs := c.runPod(podSpec{name: "logs", qos: "burstable", annotations: map[string]string{poolAnnotation: "shared"}})
	a := c.mustCreate(logs, "a", 200)
	b := c.mustCreate(logs, "b", 200)
	c.equal("shared container a", c.cpus(logs, a), c.last())
	c.equal("shared container b shares it", c.cpus(logs, b), c.last())
	c.equal("shared container Cpus_allowed_list", c.allowedOf(b), c.last())
	c.checkSandbox("shared pod", logs, c.infra())
	c.wantMetric(`cpupool_containers{pool="shared"}`, 2)
}

// testExclusiveAndShared needs two isolated CPUs besides infra.
func testExclusiveAndShared(c *tc) {
	iso := c.e.rest.Difference(cpuset.New(c.e.rest.List()[0])).Union(cpuset.New(c.e.last))
	shared := iso.List()[0]
	excl := iso.Difference(cpuset.New(shared))
	infra := c.e.online.Difference(iso).String()
	c.startPlugin(fmt.Sprintf("isolatedCPUs: %q\npools:\n  shared: {cpus: \"%d\"}\n  exclusive: {cpus: %q}\n", iso, shared, excl))
	p := c.runPod(podSpec{name: "mixed", annotations: map[string]string{poolAnnotation + "/container.fwd": "exclusive", poolAnnotation + "/container.log": "shared"}})
	fwd := c.mustCreate(p, "fwd", 1000)
	lg := c.mustCreate(p, "log", 100)
	other := c.mustCreate(p, "other", 100)
	if got, err := cpuset.Parse(c.cpus(p, fwd)); err != nil || got.Size() != 1 || !got.IsSubsetOf(excl) {
		c.Errorf("exclusive container on %q, want one CPU of %s", c.cpus(p, fwd), excl)
	}
	c.equal("shared", c.cpus(p, lg), fmt.Sprint(shared))
	c.equal("no annotation for this container: infra", c.cpus(p, other), infra)
	c.checkSandbox("pod", p, infra)
}

// testExclusiveWithSharedCPUs: a container with an exclusive CPU and the
// shared pool (shared-cpus.cpupool.dev) runs on both, is told which is
// which, has no CFS quota; when the plugin comes back with the shared pool
// on another CPU, its shared part follows and its exclusive CPU stays.
// Three CPUs: infra, shared, exclusive; then shared and infra swap.
func testExclusiveWithSharedCPUs(c *tc) {
	cpus := c.e.online.List()
	infra, shared, excl := cpus[0], cpus[1], c.e.last
	config := func(infra, shared int) string {
		iso := c.e.online.Difference(cpuset.New(infra))
		return fmt.Sprintf("isolatedCPUs: %q\npools:\n  shared: {cpus: \"%d\"}\n  exclusive: {cpus: \"%d\"}\n", iso, shared, excl)
	}
	p := c.startPlugin(config(infra, shared))
	pd := c.runPod(podSpec{name: "dpdk", annotations: map[string]string{poolAnnotation: "exclusive", "shared-cpus.cpupool.dev/container.fwd": "true"}})
	fwd := c.mustCreate(pd, "fwd", 1000)
	both := cpuset.New(shared, excl).String()
	c.equal("cpuset: the exclusive CPU and the shared pool", c.cpus(pd, fwd), both)
	c.equal("Cpus_allowed_list", c.allowedOf(fwd), both)
	c.equal("CPUPOOL_CPUS:CPUPOOL_EXCLUSIVE_CPUS:CPUPOOL_SHARED_CPUS:CPUPOOL_POOL",
		c.exec(fwd, "/bin/sh", "-c", "echo $CPUPOOL_CPUS:$CPUPOOL_EXCLUSIVE_CPUS:$CPUPOOL_SHARED_CPUS:$CPUPOOL_POOL"),
		fmt.Sprintf("%s:%d:%d:exclusive", both, excl, shared))
	c.equal("no CFS quota", c.quota(pd, fwd), "-1")
	c.wantMetric(`cpupool_pool_free_cpus{pool="exclusive"}`, 0)

	p.stop()
	c.preparePlugin(p, config(shared, infra))
	p.start(c)
	moved := cpuset.New(infra, excl).String()
	c.equal("the shared part followed the pool; the exclusive CPU stayed", c.cpus(pd, fwd), moved)
	c.equal("Cpus_allowed_list followed", c.allowedOf(fwd), moved)
}

func (c *tc) eniConfig() string {
	return fmt.Sprintf("reservedCPUs: %q\npools:\n  exclusive-non-isolcpus: {enabled: true}\n", c.infra())
}

func testExclusiveNonIsolcpus(c *tc) {
	c.startPlugin(c.eniConfig())
	online := c.e.online.String()
	web := c.runPod(podSpec{name: "web", qos: "burstable"})
	app := c.mustCreate(web, "app", 500)
	c.equal("infra before", c.cpus(web, app), online)
	c.checkSandbox("infra pod before", web, online)
	eni := c.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive-non-isolcpus"}})
	e := c.mustCreate(eni, "c", 1000)
	c.equal("exclusive-non-isolcpus container", c.cpus(eni, e), c.last())
	c.equal("infra container followed the shrink", c.cpus(web, app), c.infra())
	c.equal("infra process followed the shrink", c.allowedOf(app), c.infra())
	c.checkSandbox("infra pod after the shrink", web, c.infra())
	c.checkSandbox("exclusive-non-isolcpus pod", eni, c.infra())
	c.wantMetric(`cpupool_pool_cpus{pool="infra"}`, float64(c.e.rest.Size()))

	c.removePod(eni)
	// The CPU was held for the pod until its sandbox stopped, an event that
	// cannot reply: the infra members' updates ride on the next reply (the
	// plugin never sends updates on its own; see plugin/runtimeinfo.go).
	c.checkSandbox("infra pod grows back at once (cgroupfs)", web, online)
	c.mustCreate(web, "next", 100)
	c.wantEventually("infra container grows back after the removal", func() string { return c.cpus(web, app) }, online)
	c.equal("infra process grows back", c.allowedOf(app), online)
	c.checkSandbox("infra pod grows back", web, online)
	c.wantMetric(`cpupool_pool_cpus{pool="infra"}`, float64(c.e.online.Size()))
	// nri-cpupool links no Kubernetes client library since the DRA driver
	// has a binary of its own (issue 33: 26 MiB at 500 containers in
	// BenchmarkPluginRSS, 51 MiB when it linked them): the budget of
	// docs/performance.md.
	if kb := peakRSSKiB(c.plugin.cmd.Process.Pid); kb <= 0 || kb >= 40*1024 {
		c.Errorf("plugin peak RSS %d KiB, want under 40 MiB", kb)
	}
}

// peakRSSKiB is a process's VmHWM.
func peakRSSKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	return -1
}

// testUpdatesAfterRemovals: CPUs freed by a handler that cannot reply
// (StopPodSandbox, RemovePodSandbox) grow infra back: the sandboxes at once
// through cgroupfs, the infra containers through updates that ride on the
// next reply (never sent on their own: they could overtake a newer shrink).
// The container here never ran, so no StopContainer (which can reply) frees
// its CPU first; RemoveContainer keeps it held for its pod until the sandbox
// goes.
func testUpdatesAfterRemovals(c *tc) {
	c.startPlugin(c.eniConfig())
	online := c.e.online.String()
	web := c.runPod(podSpec{name: "web", qos: "burstable"})
	app := c.mustCreate(web, "app", 500)
	next := 0
	// nextEvent makes the runtime call the plugin with a reply (a new
	// container), which carries the waiting updates.
	nextEvent := func() {
		next++
		c.mustCreate(web, fmt.Sprintf("next%d", next), 100)
	}
	for _, how := range []string{"StopPodSandbox", "RemovePodSandbox"} {
		eni := c.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive-non-isolcpus"}})
		id, err := c.create(eni, "c", 1000, true)
		if err != nil {
			c.Fatal(err)
		}
		c.equal(how+": infra shrank for the created container", c.cpus(web, app), c.infra())
		ctx, cancel := c.ctx()
		if how == "StopPodSandbox" {
			c.removeContainer(id)
			c.wantMetric(`cpupool_held_cpus{pool="exclusive-non-isolcpus"}`, 1)
			c.equal("removed container: its CPU stays held for the pod, infra stays shrunk", c.cpus(web, app), c.infra())
			_, err = c.e.cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: eni.id})
		} else {
			// Removed while ready: the runtime stops it on the way.
			_, err = c.e.cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: eni.id})
		}
		cancel()
		if err != nil {
			c.Fatalf("%s: %v", how, err)
		}
		c.checkSandbox(how+": infra pod grows back at once", web, online)
		// The infra container follows at the next reply: the next container
		// event here, unless the runtime's own removal steps sent one (a
		// StopContainer of the never-started container can).
		nextEvent()
		c.wantEventually(how+": infra container grows back", func() string { return c.cpus(web, app) }, online)
		c.wantMetric(`cpupool_held_cpus{pool="exclusive-non-isolcpus"}`, 0)
	}
}

func testFullPoolAndBadAnnotations(c *tc) {
	c.startPlugin(c.exclusiveConfig())
	web, app, dpdk, fwd := c.exclusivePods()
	full := c.runPod(podSpec{name: "full", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	_, err := c.create(full, "c", 1000)
	if err == nil {
		c.Fatal("a container was created in a full pool")
	}
	c.contains("full pool: the plugin's message reaches the user", err.Error(), "nri-cpupool: pool exclusive cannot fit container telco/full/c")
	c.equal("full pool: exclusive container unchanged", c.cpus(dpdk, fwd), c.last())
	c.equal("full pool: infra container unchanged", c.cpus(web, app), c.infra())

	bad := c.runPod(podSpec{name: "bad", namespace: "telco", annotations: map[string]string{poolAnnotation: "turbo"}})
	_, err = c.create(bad, "c", 1000)
	if err == nil {
		c.Fatal("an unknown pool was accepted")
	}
	c.contains("unknown pool", err.Error(), "unknown pool; use one of exclusive, shared, infra, exclusive-non-isolcpus")
	tenant := c.runPod(podSpec{name: "tenant", namespace: "web", annotations: map[string]string{poolAnnotation: "exclusive"}})
	_, err = c.create(tenant, "c", 1000)
	if err == nil {
		c.Fatal("a namespace not allowed got exclusive CPUs")
	}
	c.contains("namespace not allowed", err.Error(), "may not use pool exclusive (allowedNamespaces.exclusive: [telco])")
	c.wantMetric(`cpupool_refused_containers_total{reason="placement"}`, 1)
	c.wantMetric(`cpupool_refused_containers_total{reason="annotation"}`, 2)
}

func testPluginKill9(c *tc) {
	p := c.startPlugin(c.exclusiveConfig())
	web, app, dpdk, fwd := c.exclusivePods()
	p.kill()
	p.start(c)
	c.equal("after kill -9: exclusive", c.cpus(dpdk, fwd), c.last())
	c.equal("after kill -9: infra", c.cpus(web, app), c.infra())
	c.wantMetric(`cpupool_containers{pool="exclusive"}`, 1)
	c.wantMetric(`cpupool_containers{pool="infra"}`, 1)
	after := c.runPod(podSpec{name: "after", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	if _, err := c.create(after, "c", 1000); err == nil {
		c.Error("after kill -9 the restarted plugin handed out the held exclusive CPU again")
	}
}

func testRuntimeRestart(c *tc) {
	p := c.startPlugin(c.exclusiveConfig())
	web, app, dpdk, fwd := c.exclusivePods()
	before, err := p.metric("cpupool_runtime_synchronizations_total")
	if err != nil {
		c.Fatal(err)
	}
	c.e.rt.Restart(c)
	p.waitSynced(c, before)
	if !p.alive() {
		c.Fatal("the plugin did not survive the runtime restart")
	}
	c.equal("after the runtime restart: exclusive", c.cpus(dpdk, fwd), c.last())
	c.equal("after the runtime restart: infra", c.cpus(web, app), c.infra())
	after := c.runPod(podSpec{name: "after", qos: "besteffort"})
	a := c.mustCreate(after, "app", 0)
	c.equal("after the runtime restart: new containers are pinned", c.cpus(after, a), c.infra())
	c.checkSandbox("after the runtime restart: new pod", after, c.infra())
}

func testCorruptStateFile(c *tc) {
	p := c.startPlugin(c.exclusiveConfig())
	web, app, dpdk, fwd := c.exclusivePods()
	p.kill()
	mustWrite(c, p.state, `{"schemaVersion": 1, "checksum": "sha256:0", "sta`)
	p.start(c)
	kept, _ := filepath.Glob(p.state + ".corrupt-*")
	c.equal("corrupt state kept for inspection", fmt.Sprint(len(kept)), "1")
	c.equal("after a corrupt state: exclusive", c.cpus(dpdk, fwd), c.last())
	c.equal("after a corrupt state: infra", c.cpus(web, app), c.infra())
	c.wantMetric(`cpupool_containers{pool="exclusive"}`, 1)
	data, err := os.ReadFile(p.state)
	if err != nil {
		c.Fatal(err)
	}
	c.contains("state rebuilt from the runtime", string(data), fwd)
}

func testRemovalFreesCPUs(c *tc) {
	c.startPlugin(c.exclusiveConfig())
	_, _, dpdk, _ := c.exclusivePods()
	c.removePod(dpdk)
	c.wantMetric(`cpupool_pool_free_cpus{pool="exclusive"}`, 1)
	next := c.runPod(podSpec{name: "next", namespace: "telco", annotations: map[string]string{poolAnnotation: "exclusive"}})
	n := c.mustCreate(next, "c", 1000)
	c.equal("the freed CPU is handed out again", c.cpus(next, n), c.last())
}

func testUpdateContainerOverride(c *tc) {
	p := c.startPlugin(c.exclusiveConfig())
	_, _, dpdk, fwd := c.exclusivePods()
	ctx, cancel := c.ctx()
	defer cancel()
	// Someone else (a static CPU manager, an operator) widens the cpuset.
	_, err := c.e.cri.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: fwd,
		Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: c.e.online.String()}})
	c.Logf("UpdateContainerResources: %v", err)
	c.equal("the exclusive cpuset is kept", c.cpus(dpdk, fwd), c.last())
	c.equal("the exclusive process stays", c.allowedOf(fwd), c.last())
	log, _ := os.ReadFile(p.log)
	// (The log quotes the requested list, escaped in logrus's text format.)
	c.contains("the override is logged for the operator", string(log),
		fmt.Sprintf(`keeping CPUs %d (exclusive pool) instead of the requested \"%s\"`, c.e.last, c.e.online.String()))
}

// testContainerRestart: the kubelet restarts a container as a new one with
// the next attempt number in the same pod; it gets the CPUs it had.
func testContainerRestart(c *tc) {
	c.startPlugin(c.exclusiveConfig())
	_, _, dpdk, fwd := c.exclusivePods()
	c.stopContainer(fwd)
	c.wantMetric(`cpupool_held_cpus{pool="exclusive"}`, 1)
	again := c.mustCreate(dpdk, "fwd", 1000)
	c.equal("the restarted container has its previous CPUs", c.cpus(dpdk, again), c.last())
	c.equal("its process too", c.allowedOf(again), c.last())
	c.removeContainer(fwd)
	c.equal("removing the old attempt leaves the new one alone", c.cpus(dpdk, again), c.last())
	c.wantMetric(`cpupool_containers{pool="exclusive"}`, 1)
}

// testKubeletStylePods: pods as the kubelet creates them: the RuntimeDefault
// seccomp profile, and either the containers' own PID namespaces (the
// default; CRI-O then runs no infra container, but still creates the pod's
// cgroup) or one shared PID namespace (shareProcessNamespace).
func testKubeletStylePods(c *tc) {
	c.startPlugin(c.exclusiveConfig())
	own := c.runPod(podSpec{name: "kubelet", namespace: "telco", seccomp: true, pid: runtimeapi.NamespaceMode_CONTAINER,
		annotations: map[string]string{poolAnnotation + "/container.fwd": "exclusive"}})
	fwd := c.mustCreate(own, "fwd", 1000)
	side := c.mustCreate(own, "side", 100)
	c.equal("exclusive container", c.cpus(own, fwd), c.last())
	c.equal("exclusive process", c.allowedOf(fwd), c.last())
	c.equal("infra container of the same pod", c.cpus(own, side), c.infra())
	c.checkSandbox("pod with per-container PID namespaces", own, c.infra())
	c.equal("seccomp filter on", seccompMode(c.containerPid(fwd)), "2")
	if !c.e.rt.HasInfraContainer(runtimeapi.NamespaceMode_CONTAINER) {
		c.equal("no infra process", fmt.Sprint(c.sandboxPid(own)), "0")
	}

	shared := c.runPod(podSpec{name: "sharedpid", seccomp: true, pid: runtimeapi.NamespaceMode_POD, qos: "burstable"})
	app := c.mustCreate(shared, "app", 200)
	c.equal("container in a shared PID namespace", c.cpus(shared, app), c.infra())
	c.checkSandbox("pod with a shared PID namespace", shared, c.infra())
	c.equal("the container is in the pause process's PID namespace", pidNS(c.containerPid(app)), pidNS(c.sandboxPid(shared)))
	c.equal("seccomp filter on", seccompMode(c.containerPid(app)), "2")
}

func pidNS(pid int) string {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return err.Error()
	}
	return ns
}

func seccompMode(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// testPodLife: exclusive CPUs belong to the pod's life. An exclusive init
// container completes and the pod's app container gets its CPU, another pod
// being refused in between; a crash-looping container re-created as the
// kubelet does (same pod, same name, attempt+1) keeps its CPU through each
// back-off and a kill -9 of the plugin; stopping the sandbox releases it.
func testPodLife(c *tc) {
	p := c.startPlugin(c.exclusiveConfig())
	status := func() string {
		out, _ := exec.Command(pluginBin, "status", "--state-file", p.state).CombinedOutput()
		return string(out)
	}
	exclusive := map[string]string{poolAnnotation: "exclusive"}
	exitOK, exitFail, sleep := []string{"/bin/sh", "-c", "exit 0"}, []string{"/bin/sh", "-c", "exit 3"}, []string{"/bin/sleep", "inf"}
	// waitExited waits until the container exited and the plugin holds its CPU.
	waitExited := func(id string) {
		c.Helper()
		c.eventually("container exited", func() (string, bool) {
			st := c.containerState(id)
			return st.String(), st == runtimeapi.ContainerState_CONTAINER_EXITED
		})
		c.wantMetric(`cpupool_held_cpus{pool="exclusive"}`, 1)
	}
	refused := func(what string, other *pod) {
		c.Helper()
		if _, err := c.create(other, "c", 1000); err == nil {
			c.Fatalf("%s: another pod took the held CPU", what)
		} else {
			c.contains(what+": another pod is refused", err.Error(), "pool exclusive cannot fit container telco/other/c")
		}
	}

	job := c.runPod(podSpec{name: "job", namespace: "telco", annotations: exclusive})
	initID, err := c.createCmd(job, "init", 1000, exitOK, true)
	if err != nil {
		c.Fatal(err)
	}
	c.equal("init container ran on the exclusive CPU", c.specCPUs(initID), c.last())
	waitExited(initID)
	c.contains("status: the init container's CPU is held", status(), "HELD FOR STOPPED CONTAINERS")
	other := c.runPod(podSpec{name: "other", namespace: "telco", annotations: exclusive})
	refused("between the init and the app container", other)
	app := c.mustCreate(job, "app", 1000)
	c.equal("app container reuses the init container's CPU", c.cpus(job, app), c.last())
	c.equal("app container Cpus_allowed_list", c.allowedOf(app), c.last())
	c.equal("app container runs", c.containerState(app).String(), "CONTAINER_RUNNING")
	c.removePod(job)

	crash := c.runPod(podSpec{name: "crash", namespace: "telco", annotations: exclusive})
	id, err := c.createCmd(crash, "app", 1000, exitFail, true)
	if err != nil {
		c.Fatal(err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		waitExited(id)
		refused(fmt.Sprintf("attempt %d: during the back-off", attempt), other)
		if attempt == 2 {
			p.kill()
			p.start(c)
			c.contains("status after a kill -9 of the plugin: held for the stopped container", status(), "1 stopped holding CPUs")
			refused("after a kill -9 of the plugin", other)
		}
		cmd := exitFail
		if attempt == 3 {
			cmd = sleep
		}
		if id, err = c.createCmd(crash, "app", 1000, cmd, true); err != nil {
			c.Fatalf("re-creating attempt %d: %v", attempt, err)
		}
		c.equal(fmt.Sprintf("attempt %d gets its CPU", attempt), c.specCPUs(id), c.last())
	}
	c.equal("the last attempt runs on its CPU", c.allowedOf(id), c.last())
	c.wantMetric(`cpupool_held_cpus{pool="exclusive"}`, 0)

	c.stopContainer(id)
	c.wantMetric(`cpupool_held_cpus{pool="exclusive"}`, 1)
	c.contains("stopped by the kubelet: still held", status(), "1 stopped holding CPUs")
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.e.cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: crash.id}); err != nil {
		c.Fatal(err)
	}
	c.wantMetric(`cpupool_held_cpus{pool="exclusive"}`, 0)
	c.contains("status: nothing held after the sandbox stopped", status(), "0 containers")
	o := c.mustCreate(other, "c", 1000)
	c.equal("the other pod gets the CPU once the sandbox stopped", c.cpus(other, o), c.last())
}

// testInPlaceResize: in-place resizes through UpdateContainerResources (the
// kubelet's CRI call) and the CFS quota of an exclusive container.
func testInPlaceResize(c *tc) {
	p := c.startPlugin(fmt.Sprintf("isolatedCPUs: \"%d\"\npools:\n  exclusive: {cpus: \"%d\"}\n", c.e.last, c.e.last))
	rz := c.runPod(podSpec{name: "rz", annotations: map[string]string{poolAnnotation + "/container.fwd": "exclusive"}})
	fwd := c.mustCreate(rz, "fwd", 1000)
	app := c.mustCreate(rz, "app", 500)
	infra := c.cpus(rz, app)
	c.equal("exclusive container", c.cpus(rz, fwd), c.last())
	c.equal("no CFS quota on exclusive CPUs", c.quota(rz, fwd), "-1")
	c.equal("infra container keeps the kubelet's quota", c.quota(rz, app), "50000")
	// request reads the state file as `status` does; the background writer
	// writes it a few milliseconds after the reply, so checks of a change
	// wait for it.
	request := func(name string) string {
		out, _ := exec.Command(pluginBin, "status", "--state-file", p.state).CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 7 && f[1] == "rz" && f[2] == name {
				return f[6]
			}
		}
		return "not in: " + string(out)
	}
	update := func(id string, shares, quota int64) error {
		ctx, cancel := c.ctx()
		defer cancel()
		_, err := c.e.cri.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id,
			Linux: &runtimeapi.LinuxContainerResources{CpuShares: shares, CpuQuota: quota, CpuPeriod: 100000}})
		return err
	}

	err := update(fwd, 2048, 200000)
	if err == nil {
		c.Fatal("growing past the pool succeeded")
	}
	c.contains("grow refused, the message reaches the user", err.Error(),
		"nri-cpupool: pool exclusive cannot fit container default/rz/fwd grown from 1 to 2 CPUs: it asks for 1 more CPU, but none of the pool's 1 CPU is free")
	c.equal("refused grow: cpuset unchanged", c.cpus(rz, fwd), c.last())
	c.equal("refused grow: still no quota", c.quota(rz, fwd), "-1")
	c.equal("refused grow: the state keeps the request", request("fwd"), "1000m")

	if err := update(fwd, 512, 50000); err != nil {
		c.Fatalf("resizing fwd to 500m: %v", err)
	}
	c.equal("500m: still one exclusive CPU", c.cpus(rz, fwd), c.last())
	c.equal("500m: the kubelet's quota is lifted again", c.quota(rz, fwd), "-1")
	c.wantEventually("500m: the state records the request", func() string { return request("fwd") }, "500m")
	if err := update(app, 1024, 100000); err != nil {
		c.Fatalf("resizing app: %v", err)
	}
	c.equal("infra resize: cpuset unchanged", c.cpus(rz, app), infra)
	c.equal("infra resize: the kubelet's quota applies", c.quota(rz, app), "100000")
	c.wantEventually("infra resize: the state records the request", func() string { return request("app") }, "1000m")
	c.wantMetric(`cpupool_resizes_total{pool="exclusive",result="refused"}`, 1)
	c.wantMetric(`cpupool_resizes_total{pool="exclusive",result="unchanged"}`, 1)
	c.wantMetric(`cpupool_resizes_total{pool="infra",result="unchanged"}`, 1)
}
