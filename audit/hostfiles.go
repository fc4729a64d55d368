package audit

// The host files the plugin could not leave as it wants, from its
// journal's refusals (Options.Refused): a record of a file outside the
// roots it restores under (a damaged or forged journal: not written, kept
// in the journal), and the files the kernel refused a value for, the
// plugin's or, when restoring, the original (the host then stays changed
// until a restart or restore-host puts it back). The per-CPU verdicts use
// the same refusals to explain an IRQ or a thread; this lists every one,
// so that none is hidden behind "every held exclusive CPU is clean"
// (docs/tuning.md promises that audit lists them).

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// The kinds of HostFile.
const (
	// HostFileUntrusted: a journal record of a file outside the roots the
	// plugin restores under; not written, and kept in the journal.
	HostFileUntrusted = "untrusted"
	// HostFileRefused: the kernel refused the value the plugin wrote, or
	// the original it put back (the file is then left changed).
	HostFileRefused = "refused"
	// HostFileManagedIRQ: an IRQ whose affinity the kernel manages (a
	// kernel-managed or per-CPU IRQ, EIO or EPERM): left as it was, with
	// nothing to restore, and refused on most nodes for as long as they
	// run, so listed but not held against the node (as the alerts and
	// the dashboard do not count them). A refused restore of an IRQ is
	// HostFileRefused: the plugin moved it, and it stays moved.
	HostFileManagedIRQ = "managedIRQ"
)

// managedIRQHint is what the IRQ source's Explain adds to such a refusal.
const managedIRQHint = "a kernel-managed or per-CPU IRQ"

// HostFile is one host file the plugin could not leave as it wants.
type HostFile struct {
	Path string `json:"path"`
	// Kind is HostFileUntrusted, HostFileRefused or HostFileManagedIRQ.
	Kind string `json:"kind"`
	// Reason is the journal's: the error, and a hint when it has one.
	Reason string `json:"reason"`
}

// hostFiles lists the refusals, the untrusted records first and the
// kernel-managed IRQs last, each kind by path. procRoot tells an IRQ's
// affinity file.
func hostFiles(refused map[string]string, procRoot string) []HostFile {
	var out []HostFile
	irqDir := filepath.Join(procRoot, "irq") + string(filepath.Separator)
	for path, why := range refused {
		kind := HostFileRefused
		switch {
		case strings.Contains(why, hostfiles.ErrOutsideRoots.Error()):
			kind = HostFileUntrusted
		case strings.HasPrefix(why, hostfiles.RestoreRefused):
			// An original the kernel refused to take back, the file left
			// changed, even if its IRQ is kernel-managed now (the IRQ
			// source's hint says so for a restore too).
		case strings.HasPrefix(path, irqDir) && strings.Contains(why, managedIRQHint):
			kind = HostFileManagedIRQ
		}
		out = append(out, HostFile{Path: path, Kind: kind, Reason: why})
	}
	slices.SortFunc(out, func(a, b HostFile) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), strings.Compare(a.Path, b.Path))
	})
	return out
}

func kindOrder(kind string) int {
	switch kind {
	case HostFileUntrusted:
		return 0
	case HostFileRefused:
		return 1
	}
	return 2
}

// hostFilesAmiss counts the files that are not as the plugin wants for a
// reason of this node: the kernel-managed IRQs aside.
func hostFilesAmiss(files []HostFile) int {
	n := 0
	for _, f := range files {
		if f.Kind != HostFileManagedIRQ {
			n++
		}
	}
	return n
}

// hostFilesListed bounds the host files the text names: a node may have
// hundreds of kernel-managed IRQs; --json lists them all.
const hostFilesListed = 20

// hostFileKinds says for people what each kind means.
var hostFileKinds = map[string]string{
	HostFileUntrusted:  "a journal record of a file outside the roots the plugin restores under (a damaged or forged journal?): not written, kept in the journal",
	HostFileRefused:    "the kernel refused the plugin's value (a setting the node lacks, a read-only file) or, restoring it, the original: then it stays changed",
	HostFileManagedIRQ: "IRQs whose affinity the kernel manages: left where the kernel put them (isolcpus=managed_irq keeps them off isolated CPUs where it can)",
}

// writeHostFiles writes the host files section.
func writeHostFiles(b *strings.Builder, files []HostFile) {
	if len(files) == 0 {
		return
	}
	b.WriteString("host files the plugin could not leave as it wants (its journal's refusals):\n")
	seen := map[string]bool{}
	for i, f := range files {
		if i == hostFilesListed {
			fmt.Fprintf(b, "  and %d more: nri-cpupool audit --json lists them all\n", len(files)-hostFilesListed)
			break
		}
		if !seen[f.Kind] {
			seen[f.Kind] = true
			b.WriteString("  " + f.Kind + ": " + hostFileKinds[f.Kind] + "\n")
		}
		fmt.Fprintf(b, "    %s: %s\n", shown(f.Path), shown(f.Reason))
	}
}

// shownMax is the longest path or reason the text shows whole; the
// longest real ones (a cgroup's file, an errno with its hint) fit.
const shownMax = 256

// shown is s for a terminal: quoted when it has a character that is not
// printable (a forged journal's path may hold anything), and cut to a
// quoted prefix that says its size when longer than shownMax (a forged
// journal's 20 records of 64 KiB paths were a megabyte of text). --json
// keeps them whole: it is for scripts, and says exactly what the journal
// holds.
func shown(s string) string {
	if len(s) > shownMax || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return cpulist.EchoLong(s)
	}
	return s
}
