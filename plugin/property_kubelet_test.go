package plugin

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// The kubelet's half of the property test: its device manager and its pod
// workers as the plugin sees them. A pod of cpupool.dev/exclusive is
// admitted with one Allocate per container, init container first, both for
// the same CPUs (the app container reuses the init container's devices);
// the kubelet then runs the init container to completion and starts the app
// container, restarts it, re-creates the pod's sandbox (its init container
// runs again), frees the pod's devices when the pod ends, a moment before
// its containers are gone, and after a restart of its own re-admits the
// pods that have not started. Grants files are damaged while the plugin is
// down, as a disk fault would, at moments that lose few grants (see
// damageGrants).
//
// The kubelet half opens with a fixed sequence, so that even a short run
// tests the route (see openKube): a pod admitted, its init container run to
// completion and its app container started, a kubelet restart, and a
// damaged grants file.

// kubePod is a pod of the resource as the kubelet sees it.
type kubePod struct {
	pod  *api.PodSandbox
	cpus cpuset.CPUSet // what the device manager allocated to it
	// env is each container's Allocate response: CPUPOOL_GRANT=<token>.
	env      map[string]string
	initDone bool
	// lost names the containers whose grants went with a damaged grants
	// file (no running container showed them): such a container may be
	// refused for its token; the kubelet then reports the error and the
	// user re-creates the pod.
	lost map[string]bool
	// ending: the kubelet freed its devices; its sandbox is not removed yet.
	ending    bool
	sandboxes int
}

type kubeStats struct {
	admitted, started, refusedHeld, reAdmitted, recreated, ended, restarts, damaged, lost int
	// checked and exempt are the containers of the resource that ran at a
	// check, by id: exempt if a check ever skipped them because their grant
	// was lost with a damaged file, checked otherwise.
	checked, exempt map[string]bool
	// looks and skipped count the checks of those containers, and the
	// checks that skipped one.
	looks, skipped int
}

func (s kubeStats) String() string {
	exempt := 0
	for id := range s.checked {
		if s.exempt[id] {
			exempt++
		}
	}
	return fmt.Sprintf("%d pods admitted (%d app containers started, %d creations waiting for an ending pod's CPUs), %d re-admitted after kubelet restarts, %d sandboxes re-created, %d pods ended, %d kubelet restarts, %d grants files damaged (%d grants lost), %d containers of the resource ran at a check, %d of them exempt for a lost grant (%d of %d container checks skipped)",
		s.admitted, s.started, s.refusedHeld, s.reAdmitted, s.recreated, s.ended, s.restarts, s.damaged, s.lost, len(s.checked), exempt, s.skipped, s.looks)
}

type kubeModel struct {
	kubeletMode bool
	kube        map[string]*kubePod // by pod UID
	kstats      kubeStats
	// damaged: the grants file was damaged while the plugin was down;
	// which grants were lost is known once it has synchronized.
	damaged bool
	// rejected counts the pods whose admission failed because the daemon
	// was down (the kubelet rejects them; their controller creates them
	// again): the next kubelet step that finds it up admits one.
	rejected int
	// damageDue: a damage of the grants file is due, at the first moment
	// that loses little (see damageGrants).
	damageDue bool
}

func newKubeModel() kubeModel {
	return kubeModel{kube: map[string]*kubePod{}, kstats: kubeStats{checked: map[string]bool{}, exempt: map[string]bool{}}}
}

// turnOnDevicePlugin restarts the plugin with the device plugin on, as an
// operator would: annotated exclusive containers keep their CPUs, and new
// ones are refused from then on.
func (pt *propTest) turnOnDevicePlugin() {
	pt.note("device plugin on")
	if pt.rp != nil {
		pt.kill()
	}
	pt.node, pt.kubeletMode = desktopKubelet, true
	pt.ensureUp()
	pt.openKube()
}

// openKube is the kubelet half's opening, the same in every run, so that
// even a short one checks the route: a pod of the resource admitted, its
// init container run to completion and its app container started, a
// kubelet restart, and a damaged grants file once the app container runs.
// Pods of annotated exclusive containers from the first half are removed
// first if they leave no CPU to allocate (the operator drains them).
func (pt *propTest) openKube() {
	pt.note("kubelet route: opening")
	pt.killNext.Store(false)
	for pt.freeDevices().Size() < 2 && pt.drainAnnotated() {
	}
	kp := pt.admit()
	if kp == nil {
		pt.failKube("opening: no pod of the resource admitted (free devices %s)", pt.freeDevices())
	}
	pt.progress(kp)
	pt.progress(kp)
	if pt.runningIn(kp.pod, "app") == nil {
		pt.failKube("opening: pod %s did not start its app container", kp.pod.Name)
	}
	pt.kubeletRestart()
	if !pt.damageGrants() {
		pt.failKube("opening: the grants file was not damaged")
	}
	if kp.lost["app"] || pt.runningIn(kp.pod, "app") == nil {
		pt.failKube("opening: the running app container of %s lost its grant with the damaged file", kp.pod.Name)
	}
}

// freeDevices is what the device manager may allocate: healthy devices it
// has not allocated.
func (pt *propTest) freeDevices() cpuset.CPUSet {
	free := cpuset.New()
	for _, d := range pt.rp.p.Devices() {
		if id, _ := strconv.Atoi(d.ID); d.Healthy {
			free = free.Union(cpuset.New(id))
		}
	}
	return free.Difference(pt.allocated())
}

// drainAnnotated removes a pod that holds CPUs of the exclusive pool by
// annotation (a container's or a hold), and says whether there was one.
func (pt *propTest) drainAnnotated() bool {
	p := pt.rp.p
	p.mu.Lock()
	holders := map[string]bool{}
	for _, a := range p.alloc.Assignments() {
		if a.Pool == pools.Exclusive {
			holders[a.Pod.UID] = true
		}
	}
	for _, h := range p.alloc.Holds() {
		if h.Pool == pools.Exclusive {
			holders[h.Pod.UID] = true
		}
	}
	p.mu.Unlock()
	for i, pod := range pt.pods {
		if holders[pod.Uid] {
			pt.note("drained %s", pod.Name)
			pt.removePodAt(i)
			return true
		}
	}
	return false
}

func (pt *propTest) kubeUp() bool { return pt.rp != nil && !pt.killed.Load() }

func (pt *propTest) kubeStep() {
	switch {
	case pt.rejected > 0 && pt.kubeUp():
		pt.rejected--
		pt.admit()
		return
	case pt.damageDue && pt.damageGrants():
		pt.damageDue = false
		return
	}
	k := pt.rng.IntN(100)
	switch {
	case k < 22:
		pt.admit()
	case k < 55:
		if kp := pt.pickKube(); kp != nil {
			pt.progress(kp)
		}
	case k < 63:
		if kp := pt.pickKube(); kp != nil {
			pt.restartApp(kp)
		}
	case k < 70:
		if kp := pt.pickKube(); kp != nil {
			pt.recreateSandbox(kp)
		}
	case k < 84:
		pt.endKube()
	case k < 98:
		pt.kubeletRestart()
	default:
		pt.damageDue = true
	}
}

// pickKube picks a pod of the resource that has not ended, if any.
func (pt *propTest) pickKube() *kubePod {
	var live []string
	for uid, kp := range pt.kube {
		if !kp.ending {
			live = append(live, uid)
		}
	}
	if len(live) == 0 {
		return nil
	}
	slices.Sort(live)
	return pt.kube[live[pt.rng.IntN(len(live))]]
}

// allocated is the device manager's accounting: the CPUs of every pod of
// the resource that has not ended.
func (pt *propTest) allocated() cpuset.CPUSet {
	out := cpuset.New()
	for _, kp := range pt.kube {
		if !kp.ending {
			out = out.Union(kp.cpus)
		}
	}
	return out
}

// allocate is the device manager's admission of one pod: healthy devices
// it has not allocated, then one Allocate per container, init container
// first. It fails, and the pod is rejected, without the plugin.
func (pt *propTest) allocate(cpus cpuset.CPUSet) (map[string]string, bool) {
	if !pt.kubeUp() {
		return nil, false
	}
	ids := make([]string, 0, cpus.Size())
	for _, c := range cpus.List() {
		ids = append(ids, strconv.Itoa(c))
	}
	env := map[string]string{}
	for _, name := range []string{"init", "app"} {
		resp, err := pt.rp.p.Grant(ids)
		require.NoError(pt.t, err, "Allocate of %v for %s, which the device plugin advertised healthy and the kubelet had not allocated", ids, name)
		env[name] = EnvGrant + "=" + resp[EnvGrant]
	}
	return env, true
}

// admit schedules a pod of the resource here and admits it, if the
// device manager has the CPUs; it returns the pod, or nil.
func (pt *propTest) admit() *kubePod {
	if len(pt.kube) >= 6 {
		return nil
	}
	if !pt.kubeUp() {
		pt.rejected = min(pt.rejected+1, 3)
		return nil
	}
	free := pt.freeDevices()
	size := 1 + pt.rng.IntN(2)
	if free.Size() < size {
		return nil // the scheduler does not place it here
	}
	list := free.List()
	pt.rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	cpus := cpuset.New(list[:size]...)
	env, ok := pt.allocate(cpus)
	if !ok {
		return nil
	}
	pt.seq++
	pod := pt.f.runPod(podSpec{name: "k" + strconv.Itoa(pt.seq), namespace: "telco", qos: "guaranteed"})
	kp := &kubePod{pod: pod, cpus: cpus, env: env, lost: map[string]bool{}}
	pt.kube[pod.Uid] = kp
	pt.kstats.admitted++
	pt.note("admitted %s on %s", pod.Name, cpus)
	return kp
}

// runningIn returns the running container of a name in a pod's sandbox.
func (pt *propTest) runningIn(pod *api.PodSandbox, name string) *api.Container {
	for _, c := range pt.running {
		if c.PodSandboxId == pod.Id && c.Name == name {
			return c
		}
	}
	return nil
}

// progress is the pod worker's next step: the init container until it has
// completed, then the app container.
func (pt *propTest) progress(kp *kubePod) {
	if !pt.kubeUp() && pt.overlapsEnding(kp) {
		// The runtime would create it unpinned, and Synchronize would find
		// the CPUs still held and confine it to infra until the kubelet
		// restarts it; the kubelet kills an ending pod's containers first.
		return
	}
	switch {
	case !kp.initDone:
		if c := pt.createKube(kp, "init"); c != nil {
			pt.f.exitContainer(c, 0)
			delete(pt.running, c.Id)
			delete(pt.pinnedAt, c.Id)
			pt.f.removeContainer(c) // the kubelet prunes completed init containers
			kp.initDone = true
		}
	case pt.runningIn(kp.pod, "app") == nil:
		if c := pt.createKube(kp, "app"); c != nil {
			pt.kstats.started++
		}
	}
}

// createKube creates a container of the resource with the kubelet's
// environment and a Guaranteed cpu: 10m, and checks why it was refused.
func (pt *propTest) createKube(kp *kubePod, name string) *api.Container {
	if kp.ending {
		return nil
	}
	c, err := pt.createWith(kp.pod, name, 10, kp.env[name])
	if err == nil {
		return c
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "still holds it") && pt.overlapsEnding(kp):
		// The kubelet gave the CPUs of a pod that is ending: it retries.
		pt.kstats.refusedHeld++
	case kp.lost[name] && strings.Contains(msg, "unknown grant token"):
		// The kubelet reports it; the user deletes the pod.
		pt.dropKube(kp)
	default:
		pt.failKube("container %s of pod %s (CPUs %s, lost grants %v) refused: %v", name, kp.pod.Name, kp.cpus, kp.lost, err)
	}
	return nil
}

func (pt *propTest) failKube(format string, args ...any) {
	pt.t.Helper()
	log := ""
	if pt.rp != nil {
		log = tail(pt.rp.log.String(), 3000)
	}
	pt.t.Fatalf("%s\nlast events:\n%s\nplugin log:\n%s", fmt.Sprintf(format, args...), strings.Join(pt.trace, "\n"), log)
}

// overlapsEnding tells whether a pod that is ending still has CPUs of kp's.
func (pt *propTest) overlapsEnding(kp *kubePod) bool {
	for _, o := range pt.kube {
		if o.ending && !o.cpus.Intersection(kp.cpus).IsEmpty() {
			return true
		}
	}
	return false
}

// restartApp is the kubelet restarting a failed app container with its
// cached Allocate response.
func (pt *propTest) restartApp(kp *kubePod) {
	c := pt.runningIn(kp.pod, "app")
	if c == nil {
		return
	}
	pt.stopOne(c)
	pt.f.removeContainer(c)
	pt.progress(kp)
}

// recreateSandbox is the kubelet re-creating a pod's sandbox (its pause
// container died, or the node rebooted): it stops the pod's containers and
// the old sandbox, runs a new one for the same pod, removes the old one, and
// runs the init container again before the app container.
func (pt *propTest) recreateSandbox(kp *kubePod) {
	old := kp.pod
	pt.stopKubeContainers(kp)
	pt.f.stopPod(old)
	kp.sandboxes++
	fresh := &api.PodSandbox{Id: fmt.Sprintf("%s-%d", old.Id, kp.sandboxes), Name: old.Name, Uid: old.Uid, Namespace: old.Namespace,
		Linux: &api.LinuxPodSandbox{CgroupParent: old.Linux.CgroupParent, CgroupsPath: fmt.Sprintf("%s-%d", old.Linux.CgroupsPath, kp.sandboxes)}}
	pt.f.mkCgroup(fresh.Linux.CgroupsPath)
	pt.f.mu.Lock()
	pt.f.pods[fresh.Id] = fresh
	pt.f.mu.Unlock()
	require.NoError(pt.t, pt.f.r.RunPodSandbox(pt.t.Context(), &api.RunPodSandboxRequest{Pod: fresh}))
	pt.f.removePod(old)
	kp.pod, kp.initDone = fresh, false
	pt.kstats.recreated++
	pt.note("sandbox of %s re-created: %s", old.Name, fresh.Id)
	pt.progress(kp)
}

func (pt *propTest) stopKubeContainers(kp *kubePod) {
	pt.f.mu.Lock()
	var ctrs []*api.Container
	for _, c := range pt.f.ctrs {
		if c.PodSandboxId == kp.pod.Id {
			ctrs = append(ctrs, c)
		}
	}
	pt.f.mu.Unlock()
	slices.SortFunc(ctrs, func(a, b *api.Container) int { return strings.Compare(a.Id, b.Id) })
	for _, c := range ctrs {
		if c.State != api.ContainerState_CONTAINER_STOPPED {
			pt.f.exitContainer(c, 137)
		}
		pt.f.removeContainer(c)
		delete(pt.running, c.Id)
		delete(pt.pinnedAt, c.Id)
	}
}

// endKube ends a pod: the kubelet frees its devices first and stops its
// containers and sandbox later (now or at a later event), meanwhile it
// may allocate the CPUs to another pod.
func (pt *propTest) endKube() {
	for _, uid := range slices.Sorted(func(yield func(string) bool) {
		for uid := range pt.kube {
			if !yield(uid) {
				return
			}
		}
	}) {
		if kp := pt.kube[uid]; kp.ending {
			pt.dropKube(kp) // an ending pod's containers and sandbox go first
			return
		}
	}
	kp := pt.pickKube()
	if kp == nil {
		return
	}
	kp.ending = true
	pt.kstats.ended++
	pt.note("pod %s ending", kp.pod.Name)
	if pt.rng.IntN(2) == 0 {
		pt.dropKube(kp)
	}
}

// dropKube stops and removes a pod of the resource.
func (pt *propTest) dropKube(kp *kubePod) {
	pt.note("pod %s removed", kp.pod.Name)
	pt.stopKubeContainers(kp)
	pt.f.removePod(kp.pod)
	delete(pt.kube, kp.pod.Uid)
}

// kubeletRestart: the kubelet keeps its checkpoint, so the pods that run
// keep their tokens; it re-admits the pods whose containers have not
// started, which allocates again (the same CPUs, new tokens), and its pod
// workers take every pod a step further.
func (pt *propTest) kubeletRestart() {
	pt.kstats.restarts++
	pt.note("kubelet restart")
	for _, uid := range slices.Sorted(func(yield func(string) bool) {
		for uid := range pt.kube {
			if !yield(uid) {
				return
			}
		}
	}) {
		kp := pt.kube[uid]
		if kp == nil || kp.ending {
			continue
		}
		if !kp.initDone && pt.rng.IntN(2) == 0 {
			if env, ok := pt.allocate(kp.cpus); ok {
				kp.env, kp.lost = env, map[string]bool{}
				pt.kstats.reAdmitted++
			}
		}
		pt.progress(kp)
	}
}

// damageGrants tears the grants file, as a disk fault would, and restarts
// the plugin, which finds it so; it says whether it did. The grants of
// containers that run are made again from the runtime at the restart, and
// a pod with a grant no running container shows may be refused for it,
// which exempts its containers from the checks. So it damages the file
// only when that loses little: the plugin is up (so the state file knows
// every container that runs) and every pod of the resource that is not
// ending runs its app container; a damage picked at another moment waits
// for such a one (damageDue). What is lost then is the grants of completed
// init containers: such a pod is refused when its sandbox is re-created,
// and dropped.
func (pt *propTest) damageGrants() bool {
	if !pt.kubeUp() {
		return false
	}
	for _, kp := range pt.kube {
		if !kp.ending && pt.runningIn(kp.pod, "app") == nil {
			return false
		}
	}
	pt.kill()
	pt.note("grants file damaged")
	require.NoError(pt.t, os.WriteFile(GrantsFile(pt.state), []byte(`{"torn`), 0o600))
	pt.kstats.damaged++
	pt.damaged = true
	pt.ensureUp()
	return true
}

// markLost, once the plugin synchronized after a damage, notes the grants
// it could not make again from the runtime: those no running container
// showed.
func (pt *propTest) markLost() {
	if !pt.damaged {
		return
	}
	pt.damaged = false
	known := grantsInMemory(pt.rp.p)
	for _, kp := range pt.kube {
		for name, env := range kp.env {
			if _, ok := known[strings.TrimPrefix(env, EnvGrant+"=")]; !ok && !kp.lost[name] {
				kp.lost[name] = true
				pt.kstats.lost++
			}
		}
	}
}

// checkKube checks the kubelet route's invariants against the runtime's
// view and the plugin's memory.
func (pt *propTest) checkKube(fail func(format string, args ...any)) {
	p := pt.rp.p
	p.mu.Lock()
	mem := p.grants.snapshot().byToken
	p.mu.Unlock()
	if disk := grantsOnDisk(pt.t, GrantsFile(pt.state)); len(disk) != len(mem) {
		fail("grants file has %d grants, memory %d", len(disk), len(mem))
	} else {
		for tok, g := range mem {
			if disk[tok] != g {
				fail("grants file says %+v for %s…, memory %+v", disk[tok], tok[:8], g)
			}
		}
	}
	pt.checkKubeContainers(fail)
	healthy := cpuset.New()
	for _, d := range p.Devices() {
		if id, _ := strconv.Atoi(d.ID); d.Healthy {
			healthy = healthy.Union(cpuset.New(id))
		}
	}
	for _, a := range p.alloc.Assignments() {
		if a.Pool != pools.Exclusive {
			continue
		}
		pt.f.mu.Lock()
		c := pt.f.ctrs[a.ID]
		var env []string
		if c != nil {
			env = c.Env
		}
		pt.f.mu.Unlock()
		tok, granted, _ := grantToken(env)
		if !granted {
			if !healthy.Intersection(a.Held()).IsEmpty() {
				fail("CPUs %s of annotated exclusive container %s are advertised healthy", healthy.Intersection(a.Held()), a.ID)
			}
			continue
		}
		kp := pt.kube[a.Pod.UID]
		if kp == nil || kp.lost[a.Container] {
			continue
		}
		if !cpulistEqual(a.CPUs, kp.cpus) {
			fail("container %s of pod %s runs on %s, the kubelet allocated %s", a.ID, a.Pod.Name, a.CPUs, kp.cpus)
		}
		if g := mem[tok]; g.PodUID != a.Pod.UID || g.Container != a.Container {
			fail("the token of container %s (%s/%s) is bound to %+v", a.ID, a.Pod.Name, a.Container, g)
		}
	}
}

// checkKubeContainers: every running container of a pod of the resource
// whose grant was not lost runs on exactly its CPUs, exclusively.
func (pt *propTest) checkKubeContainers(fail func(format string, args ...any)) {
	p := pt.rp.p
	for _, uid := range slices.Sorted(func(yield func(string) bool) {
		for uid := range pt.kube {
			if !yield(uid) {
				return
			}
		}
	}) {
		kp := pt.kube[uid]
		for _, name := range []string{"init", "app"} {
			if c := pt.runningIn(kp.pod, name); c != nil {
				pt.kstats.checked[c.Id] = true
				pt.kstats.looks++
				if kp.lost[name] {
					pt.kstats.exempt[c.Id] = true
					pt.kstats.skipped++
				}
			}
		}
		if s := pt.f.sandboxCPUs(kp.pod); s != "" {
			if infra := p.alloc.PoolCPUs(pools.Infra); !mustParse(s).IsSubsetOf(infra) {
				fail("sandbox of %s on %s, outside infra %s", kp.pod.Name, s, infra)
			}
		}
		c := pt.runningIn(kp.pod, "app")
		if c == nil || kp.lost["app"] {
			continue
		}
		a, ok := p.alloc.Get(c.Id)
		if !ok || a.Pool != pools.Exclusive || !cpulistEqual(a.CPUs, kp.cpus) {
			fail("app container %s of pod %s: assignment %+v, the kubelet allocated %s", c.Id, kp.pod.Name, a, kp.cpus)
		}
	}
}

// checkKubeCoverage fails a run that tested nothing of the kubelet route:
// no pod of the resource admitted, none started, checked, restarted by a
// kubelet restart or through a damaged grants file. The opening makes each
// of them happen; this says so if it ever stops.
func (pt *propTest) checkKubeCoverage() {
	pt.t.Helper()
	s := pt.kstats
	if s.admitted == 0 || s.started == 0 || len(s.checked) == 0 || s.restarts == 0 || s.damaged == 0 {
		pt.t.Fatalf("the kubelet half tested too little of the device-plugin route: %s", s)
	}
}

func cpulistEqual(a, b cpuset.CPUSet) bool { return a.Size() == b.Size() && a.IsSubsetOf(b) }

// finishKube ends every pod that is ending and takes the others to their
// app container: each pod whose grants were not lost must start.
func (pt *propTest) finishKube() {
	if !pt.kubeletMode {
		return
	}
	pt.killNext.Store(false)
	pt.endKilled()
	pt.ensureUp()
	for _, kp := range pt.kube {
		if kp.ending {
			pt.dropKube(kp)
		}
	}
	for _, uid := range slices.Sorted(func(yield func(string) bool) {
		for uid := range pt.kube {
			if !yield(uid) {
				return
			}
		}
	}) {
		kp := pt.kube[uid]
		if kp == nil {
			continue
		}
		for range 2 {
			pt.progress(kp)
		}
		if pt.kube[uid] != nil && !kp.lost["app"] && !kp.lost["init"] && pt.runningIn(kp.pod, "app") == nil {
			pt.failKube("pod %s (CPUs %s) did not start its app container", kp.pod.Name, kp.cpus)
		}
	}
	pt.check("kubelet route, end")
}
