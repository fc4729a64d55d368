package irq

// irqbalance's banned CPUs go through the journal of originals like the
// IRQs' affinities: they are host state the plugin
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
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// IrqbalanceRoot is where the journal keeps what the plugin told
// irqbalance: IrqbalancePath. No file system has it; the Source's FS
// serves it through irqbalance's control socket.
const IrqbalanceRoot = "/irqbalance"

// IrqbalancePath holds the CPUs the running irqbalance bans, as a list.
const IrqbalancePath = IrqbalanceRoot + "/banned-cpus"

// irqbalanceFS serves IrqbalancePath through irqbalance's socket (b;
// ENOENT when nil: no socket directory) and every path outside
// IrqbalanceRoot through FS. Any other path below IrqbalanceRoot is
// ENOENT: the root is admitted for restores, and a damaged or forged
// journal record of a path below it must never reach the host's file
// system, as housekeeping.SystemdFS refuses its own.
type irqbalanceFS struct {
	hostfiles.FS
	b *irqbalance
}

// FS is fsys with IrqbalanceRoot served as irqbalanceFS does, for the
// reconciler of this Source. s may be nil (no IRQ Source): the paths
// below IrqbalanceRoot are then all ENOENT.
func (s *Source) FS(fsys hostfiles.FS) hostfiles.FS {
	f := &irqbalanceFS{FS: fsys}
	if s != nil {
		f.b = s.irqbalance
	}
	return f
}

// underRoot tells whether p lies in IrqbalanceRoot, and whether it is
// the one file served there.
func underRoot(p string) (under, served bool) {
	c := path.Clean(p)
	return c == IrqbalanceRoot || strings.HasPrefix(c, IrqbalanceRoot+"/"), c == IrqbalancePath
}

func noFile(op, p string) error {
	return &fs.PathError{Op: op, Path: p, Err: syscall.ENOENT}
}

// ReadFile implements hostfiles.FS.
func (f *irqbalanceFS) ReadFile(p string) ([]byte, error) {
	under, served := underRoot(p)
	switch {
	case !under:
		return f.FS.ReadFile(p)
	case served && f.b != nil:
		return f.b.read()
	}
	return nil, noFile("read", p)
}

// WriteFile implements hostfiles.FS.
func (f *irqbalanceFS) WriteFile(p string, data []byte) error {
	under, served := underRoot(p)
	switch {
	case !under:
		return f.FS.WriteFile(p, data)
	case served && f.b != nil:
		return f.b.write(data)
	}
	return noFile("write", p)
}

// ReplaceFile implements hostfiles.FS.
func (f *irqbalanceFS) ReplaceFile(p string, data []byte) error {
	if under, _ := underRoot(p); under {
		return noFile("replace", p)
	}
	return f.FS.ReplaceFile(p, data)
}

// Rename implements hostfiles.FS.
func (f *irqbalanceFS) Rename(from, to string) error {
	u1, _ := underRoot(from)
	u2, _ := underRoot(to)
	if u1 || u2 {
		return noFile("rename", from)
	}
	return f.FS.Rename(from, to)
}
