package plugin

// The place of every CPU seen present is remembered in a node-local file
// (sysfs.RememberedFile, beside the state file), so that a CPU the
// hypervisor hot-removed is laid out at a restart, a reload and by
// validate as the running daemon lays it out: as an offline CPU of its
// pool (sysfs.Topology.WithRemembered). The file is read at start and
// written when the node shows a CPU not remembered yet or elsewhere (the
// start, a hotplug): never under the lock nor on a reply's path, and a
// write that fails is only said, since pinning never depends on a
// writable disk.

import (
	"errors"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/internal/proflabel"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// loadRemembered reads the record at path (sysfs.RememberedPath); an
// unreadable one is said and forgotten: the CPUs present now are
// remembered again, a hot-removed one is then not (a list naming it is an
// error, as before the record).
// Entries of the record that cannot be put back on topo (the kernel's) are
// said once here, naming the file and the CPUs.
// notRegular tells that path is not a regular file (ReadRemembered said
// so, with the way out): the writes that fail for that are not said again
// (sayRememberWrite).
func loadRemembered(path string, topo *sysfs.Topology, log *logrus.Logger) (rec sysfs.Remembered, read, notRegular bool) {
	rec, err := sysfs.ReadRemembered(path)
	if err != nil {
		log.Warnf("reading the remembered CPUs: %v; hot-removed CPUs are not put back in their pools", err)
	}
	if dropped := topo.RememberedDropped(rec); len(dropped) > 0 {
		log.Warnf("remembered CPUs in %s not put back in their pools: %s", path, strings.Join(dropped, "; "))
	}
	return rec, err == nil, errors.Is(err, atomicfile.ErrNotRegular)
}

// rememberedOf makes the record beside stateFile the one in force, for a
// plugin the runtime launched: it started on the default state file and
// read the record there, but the CPUs to put back are those of the node
// the configured state file belongs to (validate reads them there), and
// the pools are carved on the kernel's topology with those. Called under
// the lock, before the state is loaded and the config applied.
func (p *Plugin) rememberedOf(stateFile string) {
	p.seenCPUs, p.rememberedRead, p.rememberedNotRegular = loadRemembered(sysfs.RememberedPath(stateFile), p.discovered, p.log)
	p.rememberedGen++
	p.topo = p.discovered.WithRemembered(p.seenCPUs)
}

// rememberCPUs adds the place of topo's online CPUs to the record and
// writes it in the background when that changed it. Called without the
// lock. Before the first Synchronize it only remembers: a plugin the
// runtime launched learns its state file from Configure, and the default
// directory must not be written meanwhile (rememberSynchronized writes it
// then).
func (p *Plugin) rememberCPUs(topo *sysfs.Topology) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec, changed := topo.Remember(p.seenCPUs)
	p.seenCPUs = rec
	switch {
	case changed && p.synced:
		p.writeRememberedLater()
	case changed:
		// Written at the first Synchronize, which compares the node
		// with this memory and would see nothing new.
		p.rememberedUnwritten = true
	}
}

// rememberSynchronized writes the record at the first Synchronize, when
// the state file is the one the daemon keeps. Called under the lock.
func (p *Plugin) rememberSynchronized() {
	if p.synced {
		return
	}
	rec, changed := p.topo.Remember(p.seenCPUs)
	p.seenCPUs = rec
	if changed || !p.rememberedRead || p.rememberedUnwritten {
		p.rememberedUnwritten = false
		p.writeRememberedLater()
	}
}

// writeRememberedLater writes the record in the background, off the lock
// and any reply; writes are in order, and the newest is written last.
// Called under the lock.
func (p *Plugin) writeRememberedLater() {
	path := sysfs.RememberedPath(p.cfg.StateFile)
	p.rememberWG.Add(1)
	proflabel.Go(proflabel.Hotplug, func() {
		defer p.rememberWG.Done()
		p.rememberMu.Lock()
		defer p.rememberMu.Unlock()
		p.mu.Lock()
		rec, readSaid := p.seenCPUs, p.rememberedNotRegular
		p.mu.Unlock()
		p.sayRememberWrite(path, sysfs.WriteRemembered(path, rec), readSaid)
	})
}

// sayRememberWrite says a failed write of the record once: a directory put
// at its path (or a disk that stays read-only) fails every write the same
// way, at every CPU change, and a warning each time says nothing new. A
// path that is not a regular file was said already, with the way out, when
// the record was read (readSaid). A write that works again after a failure
// is said too. Called under rememberMu.
func (p *Plugin) sayRememberWrite(path string, err error, readSaid bool) {
	switch {
	case err == nil:
		if p.rememberFailed != "" {
			p.log.Infof("remembering where the CPUs sit: %s written again", path)
		}
		p.rememberFailed = ""
		p.mu.Lock()
		p.rememberedNotRegular = false
		p.mu.Unlock()
	case err.Error() == p.rememberFailed,
		p.rememberFailed == "" && readSaid && errors.Is(err, atomicfile.ErrNotRegular):
		p.rememberFailed = err.Error()
		p.log.Debugf("remembering where the CPUs sit: %v (said before)", err)
	default:
		p.rememberFailed = err.Error()
		p.log.Warnf("remembering where the CPUs sit: %v; a CPU hot-removed later is not put back in its pool at a restart", err)
	}
}
