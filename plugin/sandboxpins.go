package plugin

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"k8s.io/utils/cpuset"

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
// Its fields are guarded by the plugin's lock, except the channels.
type sandboxPins struct {
	all bool            // every sandbox is due (infra changed, Synchronize)
	due map[string]bool // sandboxes due, by id
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
	return sandboxPins{due: map[string]bool{}, settled: sync.NewCond(mu),
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
	p.pins.asked++
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

// pinRound takes the due sandboxes and infra under the lock and pins them
// outside it.
func (p *Plugin) pinRound() {
	p.mu.Lock()
	asked := p.pins.asked
	ids := slices.Collect(maps.Keys(p.pins.due))
	if p.pins.all {
		ids = slices.Collect(maps.Keys(p.sandbox))
	}
	slices.Sort(ids)
	jobs := make([]sandboxJob, 0, len(ids))
	for _, id := range ids {
		if sb, ok := p.sandbox[id]; ok { // not removed meanwhile
			jobs = append(jobs, sandboxJob{id, sb})
		}
	}
	p.pins.all = false
	clear(p.pins.due)
	infra := p.alloc.PoolCPUs(pools.Infra)
	target := pinTarget{pinner: p.pinner, infra: infra, mems: p.infraMems(infra),
		cgroup: p.cfg.PinSandboxes, affinity: p.cfg.SandboxAffinity}
	hold := p.pins.hold
	p.mu.Unlock()

	if hold != nil && len(jobs) > 0 {
		hold()
	}
	for _, j := range jobs {
		p.pinSandbox(j.id, j.sb, target)
	}

	p.mu.Lock()
	p.pins.done = max(p.pins.done, asked)
	p.pins.settled.Broadcast()
	p.mu.Unlock()
}

type sandboxJob struct {
	id string
	sb sandbox
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
	running := p.pins.running
	close(p.pins.quit)
	p.pins.settled.Broadcast()
	p.mu.Unlock()
	if running {
		<-p.pins.exited
	}
}

// infraMems are the memory nodes a sandbox on infra is pinned to, when
// memory is pinned.
func (p *Plugin) infraMems(infra cpuset.CPUSet) cpuset.CPUSet {
	if !p.cfg.PinMemory {
		return cpuset.New()
	}
	return p.topo.NUMANodesOf(infra)
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
