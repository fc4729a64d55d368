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
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// The kinds of HostFile.
const (
	// HostFileUntrusted: a journal record of a file outside the roots the
	// plugin restores under; not written, and kept in the journal.
	HostFileUntrusted = "untrusted"
	// HostFileRefused: the kernel refused the value the plugin wrote, or
	// the original it put back (the file is then left changed).
	HostFileRefused = "refused"
)

// HostFile is one host file the plugin could not leave as it wants.
type HostFile struct {
	Path string `json:"path"`
	// Kind is HostFileUntrusted or HostFileRefused.
	Kind string `json:"kind"`
	// Reason is the journal's: the error, and a hint when it has one.
	Reason string `json:"reason"`
}

// hostFiles lists the refusals, the untrusted records first, each kind
// by path.
func hostFiles(refused map[string]string) []HostFile {
	var out []HostFile
	for path, why := range refused {
		kind := HostFileRefused
		if strings.Contains(why, hostfiles.ErrOutsideRoots.Error()) {
			kind = HostFileUntrusted
		}
		out = append(out, HostFile{Path: path, Kind: kind, Reason: why})
	}
	slices.SortFunc(out, func(a, b HostFile) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), strings.Compare(a.Path, b.Path))
	})
	return out
}

func kindOrder(kind string) int {
	if kind == HostFileUntrusted {
		return 0
	}
	return 1
}

// hostFilesListed bounds the host files the text names: a node may have
// hundreds of kernel-managed IRQs; --json lists them all.
const hostFilesListed = 20

// hostFileKinds says for people what each kind means.
var hostFileKinds = map[string]string{
	HostFileUntrusted: "a journal record of a file outside the roots the plugin restores under (a damaged or forged journal?): not written, kept in the journal",
	HostFileRefused:   "the kernel refused the plugin's value (a kernel-managed IRQ, a setting the node lacks) or, restoring it, the original: then it stays changed",
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

// shown is s for a terminal: quoted when it has a character that is not
// printable (a forged journal's path may hold anything).
func shown(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
