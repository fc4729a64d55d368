package irq

// irqbalance's banned CPUs go through the journal of originals like the
// IRQs' affinities (review rvB, M2): they are host state the plugin
// changes, and a ban told to irqbalance outlives the plugin's process.
// They were told by the pass's hooks, unrecorded: when the release's
// "settings cpus NULL" failed for now (irqbalance busy) after the IRQs'
// restores dropped their records, and the process was killed before the
// retry, the journal held no IRQ record; a next process with
// irqIsolation off, or restore-host, made no IRQ Source and never undid
// the ban, and irqbalance kept the released CPUs banned until it
// restarted.
//
// So they are a file of no file system, IrqbalancePath, that the
// Source's FS serves through irqbalance's control socket: reading it
// gives the CPUs irqbalance bans, writing it tells irqbalance a list
// ("settings cpus"). The reconciler records the original before the
// first ban is told, restores it once nothing is banned (after the IRQs:
// irqbalanceOrder), keeps the record until irqbalance took it, and a
// next process (any process whose journal holds an IRQ record makes an
// IRQ Source) restores it after a kill -9. The record names the process
// (Identifier): a restarted irqbalance computed its own set anew, and
// the record is dropped rather than told to it.

import (
	"path"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// IrqbalanceRoot is where the journal keeps what the plugin told
// irqbalance: IrqbalancePath. No file system has it; the Source's FS
// serves it through irqbalance's control socket.
const IrqbalanceRoot = "/irqbalance"

// IrqbalancePath holds the CPUs the running irqbalance bans, as a list.
const IrqbalancePath = IrqbalanceRoot + "/banned-cpus"

// irqbalanceFS serves IrqbalancePath through irqbalance's socket and
// every other path through FS.
type irqbalanceFS struct {
	hostfiles.FS
	b *irqbalance
}

// FS is fsys with IrqbalancePath served through irqbalance's control
// socket, for the reconciler of this Source: fsys itself when the
// Source has no irqbalance socket directory.
func (s *Source) FS(fsys hostfiles.FS) hostfiles.FS {
	if s.irqbalance == nil {
		return fsys
	}
	return &irqbalanceFS{FS: fsys, b: s.irqbalance}
}

// ReadFile implements hostfiles.FS.
func (f *irqbalanceFS) ReadFile(p string) ([]byte, error) {
	if path.Clean(p) == IrqbalancePath {
		return f.b.read()
	}
	return f.FS.ReadFile(p)
}

// WriteFile implements hostfiles.FS.
func (f *irqbalanceFS) WriteFile(p string, data []byte) error {
	if path.Clean(p) == IrqbalancePath {
		return f.b.write(data)
	}
	return f.FS.WriteFile(p, data)
}
