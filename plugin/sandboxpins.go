package plugin

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/pools"
)

// sandboxPins pins pod sandboxes to infra in the background. NRI cannot
// adjust a sandbox, so the plugin writes the sandbox's cgroup itself: file
// I/O, one write per sandbox, a thousand at a Synchronize and every sandbox
// whenever infra changes, which no reply waits for. A handler marks the
// sandboxes due and replies; one goroutine pins them with infra as it is
// when it takes them, so the last round always uses the newest infra. Pause
// processes sleep: a sandbox left on the previous infra for a few
// milliseconds takes no time from the container its CPUs went to.
//
// The same rounds lift the CFS quota of the pod cgroups of pods with
// exclusive CPUs (liftPodQuota): file I/O as well, which no reply waits for.
//
// Its fields are guarded by the plugin's lock, except the channels.
type sandboxPins struct {
	all bool            // every sandbox is due (infra changed, Synchronize)
	due map[string]bool // sandboxes due, by id
	// quota are sandboxes whose pod cgroup quota alone is due (a
	// container's creation or update changes no pin), by id.
	quota map[string]bool
	// quotaWake is the pending wake-up for quota marks (podQuotaDelay).
	quotaWake *time.Timer
	// asked counts the requests, done the last one a finished round
	// covered: waitSandboxesPinned waits for done to reach asked.
	asked, done      uint64
	running, stopped bool
	settled          *sync.Cond
	// hold, when set (by tests), runs before a round pins what it took,
	// outside the lock.
	hold func()

	kick   chan struct{}
	quit   chan struct{}
	exited chan struct{}
}

func newSandboxPins(mu *sync.Mutex) sandboxPins {
	return sandboxPins{due: map[string]bool{}, quota: map[string]bool{}, settled: sync.NewCond(mu),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
}

// pinSandboxLater marks a sandbox due, or every sandbox when id is "", and
// wakes the pinner. Called under the plugin's lock; it never blocks.
func (p *Plugin) pinSandboxLater(id string) {
	if id == "" {
		p.pins.all = true
	} else {
		p.pins.due[id] = true
	}
	p.wakePinner()
}

// podQuotaDelay is how long a pod cgroup quota waits to be lifted, so that
// the creations of a burst share one round: a round per creation competed
// with the next creation's reply for the lock and the CPUs (and doubled the
// plugin's added latency in BenchmarkCreateContainerRoundTrip). A container
// throttled by its pod's quota for its first milliseconds loses nothing that
// matters; one pinned on the wrong CPUs would, so sandbox pins are not
// delayed.
const podQuotaDelay = 20 * time.Millisecond

// liftPodQuotaLater marks the pod cgroup quota of a sandbox's pod due
// (liftPodQuota), without pinning the sandbox again, and wakes the pinner
// after podQuotaDelay unless a wake-up is already set. Called under the
// plugin's lock; it never blocks.
func (p *Plugin) liftPodQuotaLater(id string) {
	p.pins.quota[id] = true
	p.pins.asked++
	if p.pins.quotaWake == nil && !p.pins.stopped {
		p.pins.quotaWake = time.AfterFunc(podQuotaDelay, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.pins.quotaWake = nil
			p.kickPinner()
		})
	}
}

// wakePinner counts a request and makes sure a round will take it.
func (p *Plugin) wakePinner() {
	p.pins.asked++
	p.kickPinner()
}

// kickPinner makes sure a round will take the requests counted so far.
func (p *Plugin) kickPinner() {
	if p.pins.stopped {
		return
	}
	if !p.pins.running {
		p.pins.running = true
		go p.pinLoop()
	}
	select {
	case p.pins.kick <- struct{}{}:
	default: // a round is due already and will take this request
	}
}

// pinSandboxesLater marks every sandbox due: infra changed.
func (p *Plugin) pinSandboxesLater() { p.pinSandboxLater("") }

func (p *Plugin) pinLoop() {
	// Started by the first handler that asks for a pin: without its own
	// label its CPU would count as that handler's.
	proflabel.Worker(proflabel.SandboxPinner).Apply()
	defer close(p.pins.exited)
	for {
		select {
		case <-p.pins.quit:
			return
		case <-p.pins.kick:
			p.pinRound()
		}
	}
}

// pinRound takes the due sandboxes and pod quotas, and infra, under the
// lock, and pins and lifts them outside it.
func (p *Plugin) pinRound() {
	p.mu.Lock()
	asked := p.pins.asked
	pin := p.pins.due // taken: the next requests go to a new set
	p.pins.due = map[string]bool{}
	if p.pins.all {
		pin = make(map[string]bool, len(p.sandbox))
		for id := range p.sandbox {
			pin[id] = true
		}
	}
	quota := p.pins.quota // marked by the creation or update of a container whose quota is lifted
	p.pins.quota = map[string]bool{}
	ids := slices.Collect(maps.Keys(pin))
	for id := range quota {
		if !pin[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	jobs := make([]sandboxJob, 0, len(ids))
	// A round of every sandbox (Synchronize, infra changed) finds the pods
	// to lift among the containers; the others were told by their marks.
	var lifted map[string]bool
	if p.pins.all {
		lifted = p.alloc.PodsWithoutCPUQuota()
	}
	for _, id := range ids {
		if sb, ok := p.sandbox[id]; ok { // not removed meanwhile
			lift := quota[id] || (sb.uid != "" && lifted[sb.uid])
			jobs = append(jobs, sandboxJob{id: id, sb: sb, pin: pin[id], liftQuota: lift})
		}
	}
	p.pins.all = false
	infra := p.alloc.PoolCPUs(pools.Infra)
	target := pinTarget{pinner: p.pinner, infra: infra, mems: p.infraMems(infra),
		cgroup: p.cfg.PinSandboxes, affinity: p.cfg.SandboxAffinity}
	hold := p.pins.hold
	p.mu.Unlock()

	if hold != nil && len(jobs) > 0 {
		hold()
	}
	var seen, unseen []sandboxJob
	for _, j := range jobs {
		if j.pin {
			p.pinSandbox(j.id, j.sb, target)
		}
		if !j.liftQuota {
			continue
		}
		if p.liftPodQuota(j.sb, target.pinner) {
			seen = append(seen, j)
		} else {
			unseen = append(unseen, j)
		}
	}

	p.mu.Lock()
	for _, j := range seen {
		if sb, ok := p.sandbox[j.id]; ok && sb.cgroupParent == j.sb.cgroupParent {
			sb.podQuotaLifted = true
			p.sandbox[j.id] = sb
		}
	}
	for _, j := range unseen {
		if sb, ok := p.sandbox[j.id]; ok && sb.cgroupParent == j.sb.cgroupParent {
			sb.noPodQuota = true
			p.sandbox[j.id] = sb
		}
	}
	p.pins.done = max(p.pins.done, asked)
	p.pins.settled.Broadcast()
	p.mu.Unlock()
}

type sandboxJob struct {
	id  string
	sb  sandbox
	pin bool // its cgroup (and pause process) is pinned to infra
	// liftQuota: a container of the pod has its CFS quota lifted, so its
	// pod cgroup's quota is lifted too.
	liftQuota bool
}

// waitSandboxesPinned returns once every sandbox marked due before the call
// has been pinned, or at once when the pinner is stopped. It must not be
// called with the lock held.
func (p *Plugin) waitSandboxesPinned() {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := p.pins.asked
	for p.pins.done < want && !p.pins.stopped {
		p.pins.settled.Wait()
	}
}

// stopPinning ends the pinner; sandboxes still due stay as they are, as
// after a crash (the next Synchronize pins every sandbox). It must not be
// called with the lock held.
func (p *Plugin) stopPinning() {
	p.mu.Lock()
	if p.pins.stopped {
		p.mu.Unlock()
		return
	}
	p.pins.stopped = true
	if p.pins.quotaWake != nil {
		p.pins.quotaWake.Stop()
		p.pins.quotaWake = nil
	}
	running := p.pins.running
	close(p.pins.quit)
	p.pins.settled.Broadcast()
	p.mu.Unlock()
	if running {
		<-p.pins.exited
	}
}

// infraMems are the memory nodes a sandbox on infra is pinned to, when
// memory is pinned: those serving infra's CPUs, as for the containers
// (the allocator's memsFor), so a memory-less node's CPUs get the nearest
// node with memory; the kernel refuses a cpuset.mems naming a node
// without memory.
func (p *Plugin) infraMems(infra cpuset.CPUSet) cpuset.CPUSet {
	if !p.cfg.PinMemory {
		return cpuset.New()
	}
	return p.topo.MemoryNodesOf(infra)
}

// pinTarget is what the pinner pins sandboxes to, and how, as it was when
// it took them.
type pinTarget struct {
	pinner           *cgroupPinner
	infra, mems      cpuset.CPUSet
	cgroup, affinity bool // config pinSandboxes and sandboxAffinity
}

// pinSandbox writes a sandbox's cgroup (and the pause process's affinity).
// The pinner calls it outside the lock.
func (p *Plugin) pinSandbox(id string, sb sandbox, t pinTarget) {
	if !t.cgroup {
		return
	}
	infra := t.infra
	err := t.pinner.Pin(sb.cgroupsPath, infra, t.mems)
	switch {
	case errors.Is(err, errNoCgroup):
		p.log.Debugf("pod %s/%s: sandbox %s has no cgroup to pin (%q)", sb.namespace, sb.name, id, sb.cgroupsPath)
	case err != nil:
		p.log.Warnf("pod %s/%s: pinning sandbox to infra %s: %v", sb.namespace, sb.name, infra, err)
	default:
		p.log.Debugf("pod %s/%s: sandbox pinned to infra %s", sb.namespace, sb.name, infra)
	}
	if t.affinity && sb.pid > 0 {
		if err := setAffinity(sb.pid, infra); err != nil {
			p.log.Warnf("pod %s/%s: %v", sb.namespace, sb.name, err)
		}
	}
}

// liftPodQuota lifts the CFS quota of a pod's cgroup when a container of
// the pod has its own lifted. The kubelet puts a quota on the pod cgroup
// too, the sum of its containers' CPU limits (1000 of 100000 for a
// cpu: 10m pod of cpupool.dev/exclusive or of a DRA claim), and leaves it
// off only for pods its own CPU manager gives exclusive CPUs
// (DisableCPUQuotaWithExclusiveCPUs), which with cpuManagerPolicy: none it
// never does. Left in place, that quota throttles the pod's exclusive
// CPUs whatever the container's cgroup says; CRI-O lifts the pod cgroup's
// quota for cpu-quota.crio.io the same way. The pause container's own
// cgroup keeps the quota of the pod's sandbox config: it bounds only the
// pause process.
//
// The quota is never restored: the pod keeps its exclusive CPUs, held for
// its stopped containers, for its whole life, and its cgroup ends with it.
// The kubelet writes the quota again when it resizes the pod in place
// (SetPodCgroupConfig); UpdateContainer asks for another lift for that.
// It reports false when the pod has no cgroup quota to lift (a runtime
// without pod cgroups, a cgroup the plugin cannot see, no cpu
// controller), said once at debug: that is no fault of the container's.
// The pinner calls it outside the lock.
func (p *Plugin) liftPodQuota(sb sandbox, pinner *cgroupPinner) bool {
	file, was, err := pinner.LiftQuota(sb.cgroupParent)
	switch {
	case errors.Is(err, errNoPodCgroup), errors.Is(err, errNoCPUController):
		if !sb.noPodQuota {
			p.log.Debugf("pod %s/%s: no CFS quota of its pod cgroup %q to lift: %v", sb.namespace, sb.name, sb.cgroupParent, err)
		}
		return false
	case err != nil:
		p.log.Warnf("pod %s/%s: lifting the CFS quota of its pod cgroup %q: %v", sb.namespace, sb.name, sb.cgroupParent, err)
	case was != "":
		p.log.Infof("pod %s/%s: CFS quota %q of its pod cgroup lifted (%s): it has exclusive CPUs", sb.namespace, sb.name, was, file)
	}
	return true
}
