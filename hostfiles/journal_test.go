package hostfiles

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJournalOfAnotherBootIsSetAside: after a reboot the kernel has reset
// the files; restoring the previous boot's originals would overwrite the
// new boot's values.
func TestJournalOfAnotherBootIsSetAside(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x"})
	src := newSource("s")
	first := openInstance(t, OS{}, tr, bootA, src)
	src.set(map[string]string{tr.path("a"): "y"})
	require.NoError(t, first.r.Flush())
	first.r.Close()
	// The reboot: the kernel's value is back, then something else sets it.
	require.NoError(t, os.WriteFile(tr.path("a"), []byte("booted\n"), 0o644))

	j, note, err := OpenJournal(OS{}, tr.journal(), "another-boot\n")
	require.NoError(t, err)
	assert.Contains(t, note, "1 original values are of boot "+bootA)
	assert.Zero(t, j.Len())
	r := NewReconciler(OS{}, j, first.log, DefaultTiming, newSource("s"))
	require.NoError(t, r.Flush())
	assert.Equal(t, "booted", tr.read(t, "a"), "left as this boot has it")
}

// TestCorruptJournalIsMovedAside: a journal that cannot be read is kept
// for the operator, and the error says what was lost.
func TestCorruptJournalIsMovedAside(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":     `{"version":1,"checksum":"sha256:`,
		"checksum":      `{"version":1,"checksum":"sha256:00","content":{"bootID":"b","records":{}}}`,
		"newer version": `{"version":2,"checksum":"x","content":{}}`,
		"relative path": journalBytes(t, map[string]Record{"irq/1": {Original: "1", Owner: "irq"}}),
		"missing owner": journalBytes(t, map[string]Record{"/proc/irq/1/smp_affinity_list": {Original: "1"}}),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, JournalFile)
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			j, _, err := OpenJournal(OS{}, path, bootA)
			require.ErrorIs(t, err, ErrJournalDiscarded)
			assert.Contains(t, err.Error(), "moved to "+path+".corrupt-")
			require.NotNil(t, j)
			assert.Zero(t, j.Len())
			aside, _ := filepath.Glob(path + ".corrupt-*")
			require.Len(t, aside, 1)
			kept, _ := os.ReadFile(aside[0])
			assert.Equal(t, content, string(kept))
		})
	}
}

func journalBytes(t *testing.T, records map[string]Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), JournalFile)
	j, _, err := OpenJournal(OS{}, path, bootA)
	require.NoError(t, err)
	require.NoError(t, j.save(records))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestJournalFileIsPrivate: the originals live in a 0600 file.
func TestJournalFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", JournalFile)
	j, _, err := OpenJournal(OS{}, path, bootA)
	require.NoError(t, err)
	require.NoError(t, j.Commit(map[string]Record{"/proc/irq/1/smp_affinity_list": {Original: "0-3", Owner: "irq"}}, nil))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*tmp*"))
	assert.Empty(t, left, "no temporary file left")
	assert.Equal(t, "/var/lib/nri-cpupool/"+JournalFile, JournalPath("/var/lib/nri-cpupool/state.json"))
}

// damagedJournal writes a journal of this boot with records, as a damaged
// or forged host-originals.json would hold them.
func damagedJournal(t *testing.T, tr *tree, records map[string]Record) {
	t.Helper()
	j, _, err := OpenJournal(OS{}, tr.journal(), bootA)
	require.NoError(t, err)
	require.NoError(t, j.Commit(records, nil))
}

// TestRecordsOutsideTheRootsAreNotRestored: a journal record of a file
// outside the roots the plugin changes (/etc/shadow, or an IRQ directory
// that is a symlink leading out) is never written: it stays in the
// journal (a later process with the right roots may own it), is logged
// once, and is reported in Status as an untrusted failure, counted once.
// A record inside the roots of an owner no Source claims (another
// version's) is restored as nobody wants it, and said so once.
func TestRecordsOutsideTheRootsAreNotRestored(t *testing.T) {
	tr := newTree(t, map[string]string{"irq/24/smp_affinity_list": "0-3", "irq/25/smp_affinity_list": "2",
		"etc/shadow": "secret", "outside/secret": "secret"})
	require.NoError(t, os.WriteFile(tr.path("irq/24/smp_affinity_list"), []byte("0-1\n"), 0o644))
	require.NoError(t, os.WriteFile(tr.path("irq/25/smp_affinity_list"), []byte("0-1\n"), 0o644))
	require.NoError(t, os.Symlink(tr.path("outside"), tr.path("irq/99")))
	shadow, escape := tr.path("etc/shadow"), tr.path("irq/99/secret")
	dotdot := tr.path("irq") + "/../etc/shadow"
	damagedJournal(t, tr, map[string]Record{
		tr.path("irq/24/smp_affinity_list"): {Original: "0-3", Owner: "irq"},
		tr.path("irq/25/smp_affinity_list"): {Original: "2", Owner: "ghost"},
		shadow:                              {Original: "pwned", Owner: "irq"},
		dotdot:                              {Original: "pwned", Owner: "irq"},
		escape:                              {Original: "pwned", Owner: "irq"},
	})
	fsys := &faultFS{}
	in := openInstance(t, fsys, tr, bootA, newSource("irq"))
	in.r.RestoreOnlyUnder(tr.path("irq"))
	require.NoError(t, in.r.Flush())
	require.NoError(t, in.r.Flush())

	assert.Equal(t, "secret", tr.read(t, "etc/shadow"))
	assert.Equal(t, "secret", tr.read(t, "outside/secret"), "not through a symlink either")
	for _, o := range fsys.takeOps() {
		assert.NotContains(t, []string{shadow, dotdot, escape}, o.path, "never written")
	}
	tr.requireOriginals(t, "inside the roots")
	assert.Equal(t, slices.Sorted(slices.Values([]string{dotdot, shadow, escape})), slices.Sorted(maps.Keys(onDisk(t, tr))), "kept in the journal")

	st := in.r.Status()
	assert.EqualValues(t, 3, st.PermanentErrors, "counted once each")
	assert.EqualValues(t, 1, st.ForeignRestores)
	assert.EqualValues(t, 2, st.Restores)
	require.Len(t, st.Failures, 3)
	for _, f := range st.Failures {
		assert.True(t, f.Untrusted && f.Restore, "%+v", f)
		assert.Contains(t, f.Error, "outside the host files this process may restore", f.Path)
	}
	var untrusted, ghost int
	for _, e := range in.hook.AllEntries() {
		if strings.Contains(e.Message, "not restored") {
			untrusted++
		}
		if strings.Contains(e.Message, `"ghost"`) {
			ghost++
		}
	}
	assert.Equal(t, 3, untrusted, "one line each, once")
	assert.Equal(t, 1, ghost, "the unknown owner is named once")
}

// storedBootID reads the boot id the journal's file names.
func storedBootID(t *testing.T, tr *tree) string {
	t.Helper()
	data, err := os.ReadFile(tr.journal())
	require.NoError(t, err)
	c, err := decodeJournal(data)
	require.NoError(t, err)
	return c.BootID
}

// TestUnknownBootIDKeepsTheOriginals: a boot_id that cannot be read is
// unknown, not another boot (issue 30 defect 5). The originals recorded
// earlier in this boot are kept and restored, and the journal keeps its
// real id: the next process, which reads boot_id again, keeps them too.
func TestUnknownBootIDKeepsTheOriginals(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x", "b": "p"})
	src := newSource("s")
	first := openInstance(t, OS{}, tr, bootA, src)
	src.set(map[string]string{tr.path("a"): "y"})
	require.NoError(t, first.r.Flush())
	first.r.Close()

	j, note, err := OpenJournal(OS{}, tr.journal(), "")
	require.NoError(t, err)
	assert.Contains(t, note, "this boot's id is unknown; the 1 original values recorded in boot "+bootA+" are kept")
	assert.Equal(t, map[string]Record{tr.path("a"): {Original: "x", Owner: "s"}}, j.Records())
	src = newSource("s")
	src.set(map[string]string{tr.path("b"): "q"}) // a is released, b is new
	second := NewReconciler(OS{}, j, first.log, DefaultTiming, src)
	require.NoError(t, second.Flush())
	second.Close()
	assert.Equal(t, "x", tr.read(t, "a"), "this boot's original restored")
	assert.Equal(t, "q", tr.read(t, "b"))
	assert.Equal(t, bootA, storedBootID(t, tr), "no empty id stamped over the real one")

	third := openInstance(t, OS{}, tr, bootA, src)
	assert.Equal(t, map[string]Record{tr.path("b"): {Original: "p", Owner: "s"}}, third.j.Records(), "the next process, knowing the boot, keeps b's original")
	src.set(nil)
	require.NoError(t, third.r.Flush())
	tr.requireOriginals(t, "after the unknown boot id")
}

// TestJournalWithoutBootIDIsKept: a journal written while the boot id was
// unknown (and no journal named one) is of an unknown boot: a process
// that knows the id keeps its records and names the boot at its next
// write.
func TestJournalWithoutBootIDIsKept(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x", "b": "p"})
	src := newSource("s")
	first := openInstance(t, OS{}, tr, "", src)
	src.set(map[string]string{tr.path("a"): "y"})
	require.NoError(t, first.r.Flush())
	first.r.Close()
	assert.Empty(t, storedBootID(t, tr))

	second := openInstance(t, OS{}, tr, bootA, src)
	assert.Equal(t, map[string]Record{tr.path("a"): {Original: "x", Owner: "s"}}, second.j.Records())
	src.set(map[string]string{tr.path("a"): "y", tr.path("b"): "q"})
	require.NoError(t, second.r.Flush())
	assert.Equal(t, bootA, storedBootID(t, tr))
	src.set(nil)
	require.NoError(t, second.r.Flush())
	tr.requireOriginals(t, "journal without a boot id")

	records, _, thisBoot, err := ReadJournal(tr.journal(), "")
	require.NoError(t, err)
	assert.True(t, thisBoot, "the audit, not knowing the boot, reads the refusals")
	assert.Empty(t, records)
}

// TestJournalWithANewerBuildsFieldsIsRestored: a newer build of the same
// journal version may add fields (journalVersion); this build reads the
// records, ignores what it does not know and puts the originals back, so
// that a downgrade keeps them rather than moving the journal aside as
// builds before this rule did.
func TestJournalWithANewerBuildsFieldsIsRestored(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x", "b": "1"})
	for name, v := range map[string]string{"a": "y", "b": "2"} {
		require.NoError(t, os.WriteFile(tr.path(name), []byte(v+"\n"), 0o644))
	}
	content := fmt.Sprintf(`{"bootID":%q,"records":{%q:{"original":"x","owner":"irq","order":2,"identity":"eth0","device":"0000:01:00.0"},`+
		`%q:{"original":"1","owner":"power","since":"2027-01-01T00:00:00Z"}},"refused":{},"generation":7}`, bootA, tr.path("a"), tr.path("b"))
	env := fmt.Sprintf(`{"version":%d,"checksum":%q,"content":%s,"writtenBy":"v9"}`, journalVersion, checksum([]byte(content)), content)
	require.NoError(t, os.MkdirAll(filepath.Dir(tr.journal()), 0o700))
	require.NoError(t, os.WriteFile(tr.journal(), []byte(env), 0o600))

	records, _, thisBoot, err := ReadJournal(tr.journal(), bootA)
	require.NoError(t, err)
	assert.True(t, thisBoot)
	assert.Equal(t, Record{Original: "x", Owner: "irq", Order: 2, Identity: "eth0"}, records[tr.path("a")])

	in := openInstance(t, OS{}, tr, bootA, newSource("irq"))
	assert.Equal(t, 2, in.j.Len(), "the records are read")
	require.NoError(t, in.r.Flush())
	tr.requireOriginals(t, "a newer build's journal")
	assert.Zero(t, in.j.Len())
	aside, _ := filepath.Glob(tr.journal() + ".corrupt-*")
	assert.Empty(t, aside, "nothing moved aside")
}

// TestJournalRecordsFollowTheirRoots: a record names the root its file lay
// under, so that a process that sees the same files under another root
// (the chart's pod under /host, the package under /) restores them there.
// Records written before roots were kept, and those whose Rel would leave
// their root, keep their path.
func TestJournalRecordsFollowTheirRoots(t *testing.T) {
	tr := newTree(t, map[string]string{"sys/devices/system/cpu/cpu0/x": "orig", "other/y": "1"})
	chart := filepath.Join(tr.dir, "host")
	node := filepath.Join(t.TempDir(), "node-root")
	require.NoError(t, os.Symlink(chart, node)) // the same files, another path
	file := "sys/devices/system/cpu/cpu0/x"

	src := newSource("power")
	first := openInstance(t, OS{}, tr, bootA, src)
	first.j.Rebase(map[string]string{RootSys: filepath.Join(chart, "sys")})
	src.set(map[string]string{tr.path(file): "changed", tr.path("other/y"): "2"})
	require.NoError(t, first.r.Flush())
	first.r.Close()
	rec := onDisk(t, tr)[tr.path(file)]
	assert.Equal(t, Record{Original: "orig", Owner: "power", Root: RootSys, Rel: "devices/system/cpu/cpu0/x"}, rec)
	assert.Equal(t, Record{Original: "1", Owner: "power"}, onDisk(t, tr)[tr.path("other/y")], "under no root: its path only")

	j, _, err := OpenJournal(OS{}, tr.journal(), bootA)
	require.NoError(t, err)
	assert.Equal(t, 1, j.Rebase(map[string]string{RootSys: filepath.Join(node, "sys")}))
	got, ok := j.Get(filepath.Join(node, file))
	require.True(t, ok, "keyed by this process's path: %v", j.Records())
	assert.Equal(t, "orig", got.Original)
	_, ok = j.Get(tr.path("other/y"))
	assert.True(t, ok, "a record of no root keeps its path")

	r := NewReconciler(OS{}, j, first.log, DefaultTiming, newSource("power"))
	r.RestoreOnlyUnder(filepath.Join(node, "sys"), filepath.Join(chart, "other"))
	t.Cleanup(r.Close)
	require.NoError(t, r.Flush())
	tr.requireOriginals(t, "restored through the other root")
	assert.Zero(t, j.Len())

	// A forged Rel that leaves its root is not followed.
	j2, _, err := OpenJournal(OS{}, filepath.Join(t.TempDir(), JournalFile), bootA)
	require.NoError(t, err)
	require.NoError(t, j2.Commit(map[string]Record{"/old/sys/a": {Original: "o", Owner: "power", Root: RootSys, Rel: "../../etc/passwd"}}, nil))
	assert.Zero(t, j2.Rebase(map[string]string{RootSys: "/new/sys"}))
	_, ok = j2.Get("/old/sys/a")
	assert.True(t, ok)
}

// TestRootlessRecordsGainTheirRoot: a record written
// before records named their root (an old chart's pod: /host/sys/...,
// its path only) is given the root it lies under by the next process
// that has that root (the new chart's pod), and the journal is written
// so at its next pass even when nothing else changes; a process under
// other roots (the package on the node) then finds it under its own.
func TestRootlessRecordsGainTheirRoot(t *testing.T) {
	tr := newTree(t, map[string]string{"sys/devices/system/cpu/cpu0/x": "changed", "other/y": "2"})
	chart := filepath.Join(tr.dir, "host")
	node := filepath.Join(t.TempDir(), "node-root")
	require.NoError(t, os.Symlink(chart, node)) // the same files, another path
	file := "sys/devices/system/cpu/cpu0/x"

	// The old build: no roots, records keyed by path only.
	old, _, err := OpenJournal(OS{}, tr.journal(), bootA)
	require.NoError(t, err)
	require.NoError(t, old.Commit(map[string]Record{tr.path(file): {Original: "orig", Owner: "power"}, tr.path("other/y"): {Original: "1", Owner: "power"}}, nil))
	require.Equal(t, Record{Original: "orig", Owner: "power"}, onDisk(t, tr)[tr.path(file)], "rootless, as an old build wrote it")

	// The new build under the chart's roots, wanting what it has: its
	// pass adds and drops nothing.
	src := newSource("power")
	src.set(map[string]string{tr.path(file): "changed", tr.path("other/y"): "2"})
	chartJ, _, err := OpenJournal(OS{}, tr.journal(), bootA)
	require.NoError(t, err)
	assert.Zero(t, chartJ.Rebase(map[string]string{RootSys: filepath.Join(chart, "sys")}), "named, not moved")
	log, _ := logtest.NewNullLogger()
	r := NewReconciler(OS{}, chartJ, log, DefaultTiming, src)
	require.NoError(t, r.Flush())
	r.Close()
	assert.Equal(t, Record{Original: "orig", Owner: "power", Root: RootSys, Rel: "devices/system/cpu/cpu0/x"}, onDisk(t, tr)[tr.path(file)])
	assert.Equal(t, Record{Original: "1", Owner: "power"}, onDisk(t, tr)[tr.path("other/y")], "under no root: its path only")

	// The package on the node, under other roots, restores it there.
	j, _, err := OpenJournal(OS{}, tr.journal(), bootA)
	require.NoError(t, err)
	assert.Equal(t, 1, j.Rebase(map[string]string{RootSys: filepath.Join(node, "sys")}))
	got, ok := j.Get(filepath.Join(node, file))
	require.True(t, ok, "keyed by this process's path: %v", j.Records())
	assert.Equal(t, "orig", got.Original)
}
