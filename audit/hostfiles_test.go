package audit

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestAuditListsRefusedAndUntrustedHostFiles: docs/tuning.md says a
// journal record outside the roots (a damaged or forged journal) and the
// files the kernel refused are listed by audit. audit took the journal's
// refusals but used them only to explain an IRQ or a thread on a held
// CPU: a forged record, a power file whose original the kernel refused to
// take back (the host left changed) never appeared, and the report said
// "every held exclusive CPU is clean". They are listed
// now (text and hostFiles), and the summary says so.
func TestAuditListsRefusedAndUntrustedHostFiles(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	opt := m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10}, "LOC": {2: 250}}))
	opt.Refused["/etc/cron.d/forged"] = fmt.Errorf("%w (%s)", hostfiles.ErrOutsideRoots, m.proc).Error()
	governor := m.sys + "/sys/devices/system/cpu/cpufreq/policy2/scaling_governor"
	opt.Refused[governor] = "write " + governor + ": invalid argument"
	// A kernel-managed IRQ, as the IRQ source explains its refusal:
	// listed, last, but not held against the node (refused on most nodes
	// for as long as they run).
	irq28 := filepath.Join(m.proc, "irq/28/smp_affinity_list")
	opt.Refused[irq28] = "write " + irq28 + ": input/output error (a kernel-managed or per-CPU IRQ: its affinity cannot be set from user space; …)"
	opt.Sample = time.Second
	rep, err := Gather([]Holding{{CPUs: cpuset.New(4), Owner: "telco/dpdk/fwd", Pool: "exclusive"}}, opt)
	require.NoError(t, err)
	require.True(t, rep.Clean, "%+v", rep.CPUs)
	require.Len(t, rep.HostFiles, 3)
	assert.Equal(t, HostFile{Path: "/etc/cron.d/forged", Kind: HostFileUntrusted, Reason: opt.Refused["/etc/cron.d/forged"]}, rep.HostFiles[0], "untrusted first")
	assert.Equal(t, HostFile{Path: governor, Kind: HostFileRefused, Reason: opt.Refused[governor]}, rep.HostFiles[1])
	assert.Equal(t, HostFile{Path: irq28, Kind: HostFileManagedIRQ, Reason: opt.Refused[irq28]}, rep.HostFiles[2])

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	out := text.String()
	assert.Contains(t, out, "/etc/cron.d/forged", "the forged record is listed, as docs/tuning.md says")
	assert.Contains(t, out, "policy2/scaling_governor: write ", "a restore the kernel refused is listed: the host is left changed")
	assert.NotContains(t, out, "every held exclusive CPU is clean\n", "the summary does not say all is well")
	assert.Contains(t, out, "every held exclusive CPU is clean, but 2 host files are not as the plugin wants (listed above)\n")
	assert.Contains(t, out, "irq/28/smp_affinity_list: write ")

	// Only kernel-managed IRQs: listed, and the CPUs' verdict stands.
	opt.Refused = map[string]string{irq28: opt.Refused[irq28]}
	rep, err = Gather([]Holding{{CPUs: cpuset.New(4), Owner: "telco/dpdk/fwd", Pool: "exclusive"}}, opt)
	require.NoError(t, err)
	text.Reset()
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "  managedIRQ: IRQs whose affinity the kernel manages")
	assert.Contains(t, text.String(), "every held exclusive CPU is clean\n")

	// No refusal: no section, and the summary as before.
	opt.Refused = nil
	rep, err = Gather([]Holding{{CPUs: cpuset.New(4), Owner: "telco/dpdk/fwd", Pool: "exclusive"}}, opt)
	require.NoError(t, err)
	assert.Empty(t, rep.HostFiles)
	text.Reset()
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "every held exclusive CPU is clean\n")
	assert.NotContains(t, text.String(), "host files")
}

// TestARefusedIRQRestoreCountsAgainstTheNode: an IRQ the plugin moved
// whose original the kernel refused to take back stays changed (the alert
// CpupoolHostFilesNotRestored fires); its journal reason carries the IRQ
// source's managed-IRQ hint as well, but begins with
// hostfiles.RestoreRefused. audit lists it as refused and does not say
// all is well.
func TestARefusedIRQRestoreCountsAgainstTheNode(t *testing.T) {
	p := "/proc/irq/40/smp_affinity_list"
	refused := map[string]string{p: hostfiles.RestoreRefused + "write " + p + ": input/output error (a kernel-managed or per-CPU IRQ: its affinity cannot be set from user space)"}
	files := hostFiles(refused, "/proc")
	require.Len(t, files, 1)
	assert.Equal(t, HostFileRefused, files[0].Kind)
	rep := &Report{Clean: true, CPUs: []CPU{{CPU: 4, Owner: "telco/dpdk/fwd", Pool: "exclusive", Clean: true}}, HostFiles: files}
	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.NotContains(t, text.String(), "every held exclusive CPU is clean\n", "a host file left changed is not 'all is well'")
	assert.Contains(t, text.String(), "but 1 host file is not as the plugin wants")
}

// TestHostFilesTextIsBounded: the text names at most 20 host files, but
// echoed each path and reason whole. A damaged or forged journal (its
// checksum is a sha256 anyone who can write the file recomputes) may hold
// records of 64 KiB paths: audit then printed over a megabyte to the
// terminal of the engineer reading it. Each is cut now, and says its
// size; --json keeps them whole, as the journal has them.
func TestHostFilesTextIsBounded(t *testing.T) {
	refused := map[string]string{}
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("/etc/%02d/%s", i, strings.Repeat("a", 64<<10))
		refused[p] = fmt.Errorf("%w (/proc, /sys/devices/system/cpu)", hostfiles.ErrOutsideRoots).Error()
	}
	rep := &Report{Clean: true, CPUs: []CPU{{CPU: 4, Owner: "telco/dpdk/fwd", Pool: "exclusive", Clean: true}}, HostFiles: hostFiles(refused, "/proc")}
	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Less(t, text.Len(), 64<<10, "audit's text is %d bytes for 20 forged records", text.Len())
	assert.Contains(t, text.String(), "/etc/00/aaaa")
	assert.Contains(t, text.String(), fmt.Sprintf("… (%d bytes)", len("/etc/00/")+64<<10), "a cut path says how long it is")
	assert.Len(t, rep.HostFiles[0].Path, len("/etc/00/")+64<<10, "--json keeps the whole path")
}
