package kernelwork

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/crashfs"
	"github.com/cpupool/nri-cpupool/irq"
)

// TestNarrowsAndRestores: with CPUs held, every rps_cpus and workqueue
// mask that names one loses them (a mask of held CPUs only gets the CPUs
// the host keeps: online, not held, not isolcpus=; RPS off stays off; a
// bound workqueue has no mask); only those are recorded; at release each
// gets exactly its original back and the journal is empty.
func TestNarrowsAndRestores(t *testing.T) {
	n := newNode(t)
	p := n.start(t, hostfiles.OS{}, true)
	p.held.set(cpuset.New(2, 3))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{
		"eth0 rx-0": "73", "eth0 rx-1": "73", "veth1a2 rx-0": "73",
		"wq": "73", "wq writeback": "f3", "wq nvme-wq": "73",
	}), n.files(t))
	records := n.journal(t)
	assert.Len(t, records, 6, "lo's RPS is off: nothing to record")
	assert.Equal(t, hostfiles.Record{Original: "7f", Owner: RPSOwner, Identity: "ifindex 2"}, records[n.path("eth0 rx-0")])
	assert.Equal(t, hostfiles.Record{Original: "ff", Owner: WorkqueueOwner}, records[n.path("wq writeback")])

	// A pass with nothing new writes nothing.
	st := p.r.Status()
	require.NoError(t, p.r.Flush())
	assert.Equal(t, st.Writes, p.r.Status().Writes)

	p.held.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, originals, n.files(t))
	assert.Empty(t, n.journal(t))
	assert.Empty(t, p.r.Status().Failures)
}

// TestHeldSetChanges: when the held CPUs change (a container released
// and another placed, a reload, a CPU hotplug that restarts the sources
// with other online CPUs), every mask is computed from its original, never
// from the value written before.
func TestHeldSetChanges(t *testing.T) {
	n := newNode(t)
	p := n.start(t, hostfiles.OS{}, true)
	p.held.set(cpuset.New(2, 3))
	require.NoError(t, p.r.Flush())
	p.held.set(cpuset.New(3, 6))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{
		"eth0 rx-0": "37", "eth0 rx-1": "04", "veth1a2 rx-0": "37",
		"wq": "37", "wq writeback": "b7", "wq nvme-wq": "04",
	}), n.files(t), "2 is back where it was, 3 and 6 are gone")
	// A release that keeps another CPU held: 3 is released, 6 stays.
	// Masks that already avoid 6 must still get 3 back (kicked pass, which
	// takes what it knows of the files, and the rescan alike).
	p.held.set(cpuset.New(6))
	require.NoError(t, p.r.FlushKicked())
	sixHeld := with(map[string]string{
		"eth0 rx-0": "3f", "eth0 rx-1": "0c", "veth1a2 rx-0": "3f",
		"wq": "3f", "wq writeback": "bf", "wq nvme-wq": "0c",
	})
	assert.Equal(t, sixHeld, n.files(t), "3 is back, only 6 is left out")
	require.NoError(t, p.r.Flush())
	assert.Equal(t, sixHeld, n.files(t))

	// A hotplug: CPU 0 went offline; the sources start again with the
	// online CPUs, on the same journal (plugin restartIsolation).
	p.r.Close()
	n.online = cpuset.New(1, 2, 3, 4, 5, 6, 7)
	next := n.start(t, hostfiles.OS{}, true)
	next.held.set(cpuset.New(2, 3))
	require.NoError(t, next.r.Flush())
	assert.Equal(t, with(map[string]string{
		"eth0 rx-0": "73", "eth0 rx-1": "72", "veth1a2 rx-0": "73",
		"wq": "73", "wq writeback": "f3", "wq nvme-wq": "72",
	}), n.files(t), "eth0 rx-1 and nvme-wq held only held CPUs: the fallback leaves out the offline CPU")
	next.held.set(cpuset.New())
	require.NoError(t, next.r.Flush())
	assert.Equal(t, originals, n.files(t))
	assert.Empty(t, n.journal(t))
}

// TestReleasedCPUGetsKernelWorkBackWhileAnotherStaysHeld: CPUs 2 and 3
// are held, then 2 is released while 3 stays held. The masks narrowed to
// "original less 2 and 3" still avoid 3, yet they are the plugin's own
// writes for a want that has changed: each gets its original less 3, so
// that CPU 2 takes RPS and unbound workqueue work again at once, not only
// once nothing at all is held.
func TestReleasedCPUGetsKernelWorkBackWhileAnotherStaysHeld(t *testing.T) {
	for _, kicked := range []bool{false, true} {
		name := map[bool]string{false: "rescan", true: "kicked pass"}[kicked]
		t.Run(name, func(t *testing.T) {
			n := newNode(t)
			p := n.start(t, hostfiles.OS{}, true)
			p.held.set(cpuset.New(2, 3))
			require.NoError(t, p.r.Flush())
			p.held.set(cpuset.New(3))
			if kicked {
				require.NoError(t, p.r.FlushKicked())
			} else {
				require.NoError(t, p.r.Flush())
			}
			assert.Equal(t, with(map[string]string{
				"eth0 rx-0": "77", "eth0 rx-1": "04", "veth1a2 rx-0": "77",
				"wq": "77", "wq writeback": "f7", "wq nvme-wq": "04",
			}), n.files(t), "CPU 2 was released: its kernel work is back, only 3 is left out")
		})
	}
}

// TestDevicesComeAndGo: a device that appears while CPUs are held (a new
// pod's veth, a hotplugged NIC) is narrowed at the next pass; one that
// goes away has its record dropped, not an error; a device name taken
// again by another device (another ifindex) is that device's: its
// content now is its original, not the old one's.
func TestDevicesComeAndGo(t *testing.T) {
	n := newNode(t)
	p := n.start(t, hostfiles.OS{}, false)
	p.held.set(cpuset.New(4))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "6f", n.read(t, "veth1a2 rx-0"))

	newVeth := device{"sys/devices/virtual/net/veth9f8", "11", []string{"ff", "f0"}}
	n.addDevice(t, "veth9f8", newVeth)
	require.NoError(t, p.r.Flush())
	path := func(dev, q string) string { return filepath.Join(n.sysfs, NetClass, dev, "queues", q, "rps_cpus") }
	read := func(path string) string {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(data)
	}
	assert.Equal(t, "ef", read(path("veth9f8", "rx-0")))
	assert.Equal(t, "e0", read(path("veth9f8", "rx-1")))

	// The pod goes: its veth with it, while the CPU is still held.
	require.NoError(t, os.RemoveAll(filepath.Join(n.sysfs, newVeth.dir)))
	require.NoError(t, os.Remove(filepath.Join(n.sysfs, NetClass, "veth9f8")))
	require.NoError(t, p.r.Flush())
	assert.NotContains(t, n.journal(t), path("veth9f8", "rx-0"))

	// veth1a2 goes and another device takes its name (ifindex 12), with
	// RPS on CPUs 0-3: its original is 0f, not the old device's 7f.
	n.removeDevice(t, "veth1a2")
	n.addDevice(t, "veth1a2", device{"sys/devices/virtual/net/veth1a2", "12", []string{"1f"}})
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0f", n.read(t, "veth1a2 rx-0"))
	assert.Equal(t, hostfiles.Record{Original: "1f", Owner: RPSOwner, Identity: "ifindex 12"}, n.journal(t)[n.path("veth1a2 rx-0")])

	p.held.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{"veth1a2 rx-0": "1f"}), n.files(t))
	assert.Empty(t, n.journal(t))
	assert.Empty(t, p.r.Status().Failures)
}

// TestGlobalMaskLeftToHousekeeping: without Global the global mask is not
// touched (housekeeping owns it when it runs), the workqueues' own masks
// are.
func TestGlobalMaskLeftToHousekeeping(t *testing.T) {
	n := newNode(t)
	p := n.start(t, hostfiles.OS{}, false)
	p.held.set(cpuset.New(0))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "7f", n.read(t, "wq"))
	assert.Equal(t, "fe", n.read(t, "wq writeback"))
	assert.NotContains(t, n.journal(t), n.path("wq"))
}

// TestClaimsTheGlobalMaskWhenItsOwn: the workqueue Source claims the
// global mask when it is its own (Global), so that a pass in which it
// fails to plan leaves the mask as housekeeping recorded it before a
// hand-over (hostfiles.Claimer); never a workqueue's own mask, which only
// it records.
func TestClaimsTheGlobalMaskWhenItsOwn(t *testing.T) {
	n := newNode(t)
	own, left := n.start(t, hostfiles.OS{}, true), n.start(t, hostfiles.OS{}, false)
	assert.True(t, own.wq.Claims(n.path("wq")))
	assert.False(t, left.wq.Claims(n.path("wq")), "housekeeping's")
	assert.False(t, own.wq.Claims(n.path("wq writeback")))
}

// kernelFS is a kernel that takes rps_cpus writes without some CPUs
// (isolcpus= and nohz_full CPUs, which store_rps_map drops), and shows
// the mask so.
type kernelFS struct {
	hostfiles.FS
	drops cpuset.CPUSet
}

func (k kernelFS) WriteFile(path string, data []byte) error {
	if filepath.Base(path) != "rps_cpus" {
		return k.FS.WriteFile(path, data)
	}
	set, err := irq.ParseMask(string(data))
	if err != nil {
		return err
	}
	shown, err := irq.FormatMask(set.Difference(k.drops), string(data))
	if err != nil {
		return err
	}
	return k.FS.WriteFile(path, []byte(shown))
}

// TestKernelShowsItsOwnForm: the kernel drops isolcpus= and nohz_full
// CPUs from an rps_cpus mask written, so it may show a mask narrower than
// the plugin wrote: CPU 6 here is nohz_full but not isolcpus=, runnable
// to the plugin, and eth0 rx-1 (CPUs 2-3, both held) gets the host's
// CPUs 0-1 and 4-6, shown without 6. What the kernel shows right after
// the write meets that want, and is not written again at every pass. A
// new process, which has not seen the kernel's form, writes it once more,
// and takes it from then on.
func TestKernelShowsItsOwnForm(t *testing.T) {
	n := newNode(t)
	// The node's masks as this kernel shows them: without CPU 6.
	write(t, n.path("eth0 rx-0"), "3f")
	write(t, n.path("veth1a2 rx-0"), "3f")
	booted := n.files(t)
	fsys := &crashfs.FS{Inner: kernelFS{FS: hostfiles.OS{}, drops: cpuset.New(6, 7)}}
	p := n.start(t, fsys, true)
	p.held.set(cpuset.New(2, 3))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "33", n.read(t, "eth0 rx-1"), "73 as the kernel shows it")
	for range 3 {
		require.NoError(t, p.r.Flush())
		require.NoError(t, p.r.FlushKicked())
	}
	assert.Equal(t, 1, fsys.Writes(n.path("eth0 rx-1")), "written once")

	p.r.Close()
	next := n.start(t, fsys, true)
	next.held.set(cpuset.New(2, 3))
	for range 3 {
		require.NoError(t, next.r.Flush())
	}
	assert.Equal(t, 2, fsys.Writes(n.path("eth0 rx-1")), "written once more by the new process")

	next.held.set(cpuset.New())
	require.NoError(t, next.r.Flush())
	assert.Equal(t, booted, n.files(t))
}

// TestRefusedMask: a mask the kernel refuses for good (EINVAL) is reported
// with the hint, and its record dropped (the kernel left it as it was).
func TestRefusedAndUnreadable(t *testing.T) {
	n := newNode(t)
	write(t, n.path("wq nvme-wq"), "not a mask")
	p := n.start(t, hostfiles.OS{}, true)
	p.held.set(cpuset.New(2))
	require.NoError(t, p.r.Flush())
	fails := p.r.Status().Failures
	require.Len(t, fails, 1)
	assert.Equal(t, n.path("wq nvme-wq"), fails[0].Path)
	assert.Contains(t, fails[0].Error, "the mask of workqueue nvme-wq: malformed CPU mask")
	assert.Equal(t, "not a mask", n.read(t, "wq nvme-wq"))
}

// TestForgedJournal: the journal's records are restored only for the
// files these sources change: an rps_cpus file through its symlink, a
// workqueue mask. A record of another device file (a PCI device's
// remove) is not written, whatever its owner says.
func TestForgedJournal(t *testing.T) {
	n := newNode(t)
	remove := filepath.Join(n.sysfs, "sys/devices/pci0000:00/0000:00:03.0/remove")
	write(t, remove, "0")
	// Lexically of the shape until cleaned.
	dotted := n.sysfs + "/sys/devices/pci0000:00/0000:00:03.0/net/eth0/queues/rx-0/../../../../remove"
	// Of the shape, but through a symlink out of sysfs.
	outside := filepath.Join(n.dir, "outside", "queues", "rx-0", "rps_cpus")
	write(t, outside, "0")
	require.NoError(t, os.Symlink(filepath.Join(n.dir, "outside"), filepath.Join(n.sysfs, NetClass, "evil")))
	linked := filepath.Join(n.sysfs, NetClass, "evil", "queues", "rx-0", "rps_cpus")
	write(t, n.path("eth0 rx-0"), "0f") // left narrowed by a dead process
	j, _, err := hostfiles.OpenJournal(hostfiles.OS{}, hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	require.NoError(t, j.Commit(map[string]hostfiles.Record{
		n.path("eth0 rx-0"): {Original: "7f", Owner: RPSOwner},
		remove:              {Original: "1", Owner: RPSOwner},
		dotted:              {Original: "1", Owner: RPSOwner},
		linked:              {Original: "ff", Owner: RPSOwner},
	}, nil))
	p := n.start(t, hostfiles.OS{}, true)
	require.NoError(t, p.r.Flush())
	assert.Equal(t, originals, n.files(t))
	data, err := os.ReadFile(remove)
	require.NoError(t, err)
	assert.Equal(t, "0\n", string(data), "never written")
	data, err = os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, "0\n", string(data), "never written")
	untrusted := 0
	for _, f := range p.r.Status().Failures {
		if f.Untrusted {
			untrusted++
		}
	}
	assert.Equal(t, 3, untrusted, "%+v", p.r.Status().Failures)
	assert.Len(t, n.journal(t), 3, "the untrusted records are kept")
}

// TestNoMaskLeftOnOfflineOrIsolatedCPUsOnly: a mask whose CPUs left after
// the held ones are offline (SMT turned off, a CPU taken down) or
// isolcpus= only gets the CPUs the host keeps, as one of held CPUs only
// does: the kernel builds an RPS map of online, non-isolated CPUs only
// (nothing left: RPS off; only isolated CPUs: EINVAL), and an unbound
// workqueue whose mask has no online CPU runs its workers wherever the
// scheduler falls back to, the held CPUs included.
func TestNoMaskLeftOnOfflineOrIsolatedCPUsOnly(t *testing.T) {
	for _, tc := range []struct {
		name           string
		online         cpuset.CPUSet
		isolated       cpuset.CPUSet
		wantRx1, wantQ string
	}{
		{"CPU 3 offline", cpuset.New(0, 1, 2, 4, 5, 6, 7), cpuset.New(7), "73", "73"},
		{"CPU 3 isolcpus=", cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), cpuset.New(3, 7), "73", "73"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.online, n.isolated = tc.online, tc.isolated
			p := n.start(t, hostfiles.OS{}, true)
			// eth0 rx-1 and nvme-wq are steered to CPUs 2-3.
			p.held.set(cpuset.New(2))
			require.NoError(t, p.r.Flush())
			assert.Equal(t, tc.wantRx1, n.read(t, "eth0 rx-1"), "not CPU 3 alone")
			assert.Equal(t, tc.wantQ, n.read(t, "wq nvme-wq"), "not CPU 3 alone")
			assert.Equal(t, "7b", n.read(t, "eth0 rx-0"), "a mask with usable CPUs left only loses the held one")

			p.held.set(cpuset.New())
			require.NoError(t, p.r.Flush())
			assert.Equal(t, originals, n.files(t))
			assert.Empty(t, n.journal(t))
		})
	}
}

// TestDefaultMaskOfNewDevices: net.core.rps_default_mask, which every
// device registered later starts with (a new pod's veth), loses the held
// CPUs like the queues' masks, is journaled, and comes back exactly at
// release and after a kill -9; a default of 0 (RPS off for new devices,
// the kernel's default) is left alone, and a kernel without the file
// (before 6.2) is no error.
func TestDefaultMaskOfNewDevices(t *testing.T) {
	n := newNode(t)
	def := filepath.Join(n.proc, RPSDefaultMask)
	write(t, def, "ff")
	read := func() string {
		data, err := os.ReadFile(def)
		require.NoError(t, err)
		return strings.TrimSpace(string(data))
	}
	p := n.start(t, hostfiles.OS{}, true)
	p.held.set(cpuset.New(2, 3))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "f3", read())
	assert.Equal(t, hostfiles.Record{Original: "ff", Owner: RPSOwner}, n.journal(t)[def])
	p.held.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "ff", read(), "exactly as it was")
	assert.Empty(t, n.journal(t))

	// Killed while it is narrowed: the next process, nothing held, puts
	// it back.
	p.held.set(cpuset.New(4))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "ef", read())
	p.r.Close()
	next := n.start(t, hostfiles.OS{}, true)
	require.NoError(t, next.r.Flush())
	assert.Equal(t, "ff", read())
	assert.Empty(t, n.journal(t))

	write(t, def, "00")
	next.held.set(cpuset.New(2))
	require.NoError(t, next.r.Flush())
	assert.Equal(t, "00", read(), "RPS off for new devices: nothing to move")
	assert.NotContains(t, n.journal(t), def)

	require.NoError(t, os.Remove(def))
	require.NoError(t, next.r.Flush())
	assert.Empty(t, next.r.Status().Failures)
}

// TestRPSRefusalHints: a refusal's hint names what lets the write through
// for the file refused. Under the packaged systemd unit /proc/sys is
// read-only (ReadOnlyPaths=), so net.core.rps_default_mask needs its own
// ReadWritePaths=, not /sys/devices; and the kernel takes an rps_cpus
// write only with CAP_NET_ADMIN (EPERM), which the unit's bounding set
// leaves out, so ReadWritePaths= alone does not make it writable.
func TestRPSRefusalHints(t *testing.T) {
	s := NewRPSSource(Config{SysfsRoot: "/", ProcRoot: "/proc"}, nil)
	def := filepath.Join("/proc", RPSDefaultMask)
	queue := "/sys/devices/pci0000:00/0000:00:03.0/net/eth0/queues/rx-0/rps_cpus"
	hint := s.Explain(def, &os.PathError{Op: "open", Path: def, Err: syscall.EROFS})
	assert.Contains(t, hint, "ReadWritePaths=/proc/sys/net/core/rps_default_mask")
	assert.NotContains(t, hint, "/sys/devices")
	assert.Contains(t, s.Explain(queue, &os.PathError{Op: "open", Path: queue, Err: syscall.EROFS}), "ReadWritePaths=/sys/devices")
	perm := s.Explain(queue, &os.PathError{Op: "write", Path: queue, Err: syscall.EPERM})
	assert.Contains(t, perm, "CAP_NET_ADMIN")
}
