package housekeeping

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/crashfs"
)

// fakeSystemd is systemd's D-Bus API as housekeeping uses it: each unit's
// AllowedCPUs as the byte mask systemd sends. It outlives the "processes"
// of a test, as systemd outlives the plugin.
type fakeSystemd struct {
	mu      sync.Mutex
	allowed map[string][]byte
	// down makes the dial fail (no systemd, no bus); setErr answers a
	// unit's SetUnitProperties with an error.
	down   bool
	setErr map[string]error
	// crash, when set, is the dying process's file system: a property
	// set counts as one of its mutating calls.
	crash       *crashfs.FS
	dials, sets int
	// dialCtx is the context of the last dial: godbus closes a connection
	// once its dial context is done, which the fake's calls then fail as.
	dialCtx        context.Context
	notRuntime     []string
	touchedPodTree bool
	// onSet, when set, is told each AllowedCPUs= set, as systemd writes
	// the unit's cpuset.
	onSet func(unit string, cpus cpuset.CPUSet)
	// async: onSet runs after the answer, as systemd realizes a unit's
	// cgroup: before it handles the next request, or at settle.
	async  bool
	queued []func()
}

// flush runs the queued onSet calls. Called with mu.
func (f *fakeSystemd) flush() {
	for _, fn := range f.queued {
		fn()
	}
	f.queued = nil
}

// settle is systemd's event loop running on with no request.
func (f *fakeSystemd) settle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flush()
}

// sdOriginals are the units' AllowedCPUs as the node booted: user.slice
// confined to 0-3 by its admin, the others unset.
var sdOriginals = map[string]string{"system.slice": "", "user.slice": "0-3", "init.scope": "", "machine.slice": ""}

func newFakeSystemd() *fakeSystemd {
	f := &fakeSystemd{allowed: map[string][]byte{}, setErr: map[string]error{}}
	for unit, list := range sdOriginals {
		set, _ := cpuset.Parse(list)
		f.allowed[unit] = setToMask(set)
	}
	return f
}

func (f *fakeSystemd) dial(ctx context.Context) (Bus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dialCtx = ctx
	if f.down {
		return nil, errors.New("dial unix /run/systemd/private: connect: connection refused")
	}
	f.dials++
	return fakeConn{f}, nil
}

// units reads every unit's AllowedCPUs as a CPU list.
func (f *fakeSystemd) units() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for unit, mask := range f.allowed {
		out[unit] = maskToSet(mask).String()
	}
	return out
}

type fakeConn struct{ f *fakeSystemd }

func (c fakeConn) GetUnitTypePropertyContext(_ context.Context, unit, unitType, name string) (*sddbus.Property, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.flush()
	if c.f.dialCtx.Err() != nil {
		return nil, errors.New("read unix @->/run/systemd/private: use of closed network connection")
	}
	if strings.HasPrefix(unit, "kubepods") {
		c.f.touchedPodTree = true
	}
	want := map[string]string{".slice": "Slice", ".scope": "Scope"}[filepath.Ext(unit)]
	if unitType != want || name != "AllowedCPUs" {
		return nil, godbus.Error{Name: "org.freedesktop.DBus.Error.UnknownProperty", Body: []any{unitType + "." + name}}
	}
	mask, ok := c.f.allowed[unit]
	if !ok {
		return nil, godbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit", Body: []any{"Unit " + unit + " not loaded."}}
	}
	return &sddbus.Property{Name: name, Value: godbus.MakeVariant(append([]byte{}, mask...))}, nil
}

func (c fakeConn) SetUnitPropertiesContext(_ context.Context, unit string, runtime bool, props ...sddbus.Property) error {
	set := func() error {
		c.f.mu.Lock()
		defer c.f.mu.Unlock()
		c.f.flush()
		c.f.sets++
		if c.f.dialCtx.Err() != nil {
			return errors.New("write unix @->/run/systemd/private: use of closed network connection")
		}
		if strings.HasPrefix(unit, "kubepods") {
			c.f.touchedPodTree = true
		}
		if !runtime {
			c.f.notRuntime = append(c.f.notRuntime, unit)
		}
		if err := c.f.setErr[unit]; err != nil {
			return err
		}
		for _, p := range props {
			mask, ok := p.Value.Value().([]byte)
			if p.Name != "AllowedCPUs" || !ok {
				return godbus.Error{Name: "org.freedesktop.DBus.Error.InvalidArgs", Body: []any{"Cannot set property " + p.Name}}
			}
			c.f.allowed[unit] = mask
			if on := c.f.onSet; on != nil {
				cpus := maskToSet(mask)
				if c.f.async {
					c.f.queued = append(c.f.queued, func() { on(unit, cpus) })
				} else {
					on(unit, cpus)
				}
			}
		}
		return nil
	}
	if c.f.crash != nil {
		return c.f.crash.Mutate(set)
	}
	return set()
}

func (fakeConn) Close() {}

// sdNode is a node whose cgroups systemd manages: the top-level cgroups
// of its active units, and the pods' slice.
func sdNode(t *testing.T) *node {
	t.Helper()
	n := newNode(t)
	for _, dir := range []string{"init.scope", "system.slice", "user.slice", "kubepods.slice"} {
		require.NoError(t, os.MkdirAll(filepath.Join(n.cgroup, dir), 0o755))
	}
	return n
}

// startSystemd is a process of the plugin on sdNode: its reconciler's FS
// serves the units' properties through sd.
func (n *node) startSystemd(t *testing.T, sd *fakeSystemd, base hostfiles.FS) *process {
	t.Helper()
	sfs := NewSystemdFS(base, sd.dial, n.cgroup)
	p := n.start(t, sfs, 1)
	p.src.cfg.Systemd = sfs
	p.r.RestoreOnlyUnder(filepath.Join(n.sysfs, "sys/devices/virtual/workqueue"), n.cgroup, SystemdRoot)
	return p
}

func withUnits(changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range sdOriginals {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

// TestSystemdSlicesConfined: under systemd, the active host units get
// AllowedCPUs= as runtime properties, narrowed from their originals
// (user.slice's 0-3 is within the set already), machine.slice (no
// cgroup: not active) and kubepods.slice are left alone, not one cgroup
// file is written, and a release gives every unit exactly its original.
func TestSystemdSlicesConfined(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	p := n.startSystemd(t, sd, hostfiles.OS{})
	require.NoError(t, p.r.Flush())
	assert.Equal(t, sdOriginals, sd.units(), "nothing kept: nothing set")
	assert.Zero(t, sd.sets)

	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, withUnits(map[string]string{"system.slice": "0-5", "init.scope": "0-5"}), sd.units())
	assert.Equal(t, with(map[string]string{"wq": "3e"}), n.files(t), "no cgroup file written")
	st := p.r.Status()
	assert.Equal(t, 3, st.Records[Owner], "the mask, system.slice and init.scope")
	assert.Empty(t, st.Failures)
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Equal(t, "", records[SystemdPath("system.slice")].Original, "unset, recorded before the change")

	p.keep.set(cpuset.New(7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, withUnits(map[string]string{"system.slice": "0-6", "init.scope": "0-6"}), sd.units(), "widened from the originals")

	// Someone (a unit file's AllowedCPUs= after daemon-reload) changes a
	// unit behind the plugin's back: the next pass sets it again.
	sd.allowed["system.slice"] = setToMask(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-6", sd.units()["system.slice"])

	// systemd wrote the unit's cpuset.cpus while it needed the controller;
	// unset, it leaves the file as it is: the plugin empties it.
	stale := filepath.Join(n.cgroup, "system.slice", "cpuset.cpus")
	require.NoError(t, os.WriteFile(stale, []byte("0-6\n"), 0o644))
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, sdOriginals, sd.units(), "released: every unit exactly as it was")
	assert.Equal(t, originals, n.files(t))
	data, err := os.ReadFile(stale)
	require.NoError(t, err)
	assert.Equal(t, "\n", string(data), "unset: every CPU of the parent, as systemd writes it")
	records, _, _, err = hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
	assert.Empty(t, sd.notRuntime, "runtime properties only: nothing persists past a reboot")
	assert.False(t, sd.touchedPodTree, "the pods' slice is the pools'")
}

// TestSystemdUnreachable: without systemd's API the pass goes on (the
// workqueue mask is confined, no error, no backoff), the log says so
// once and each such pass is counted; once systemd answers, the units
// are confined. A unit changed earlier keeps its record while systemd
// cannot be reached (the restore is retried), and gets its original back
// when it can.
func TestSystemdUnreachable(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	sd.down = true
	p := n.startSystemd(t, sd, hostfiles.OS{})
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{"wq": "3e"}), n.files(t))
	assert.Equal(t, sdOriginals, sd.units())
	assert.Equal(t, uint64(2), p.src.SystemdUnreachable())
	var warned []string
	for _, e := range p.hook.AllEntries() {
		if strings.Contains(e.Message, "cannot be reached") {
			warned = append(warned, e.Message)
		}
	}
	require.Len(t, warned, 1, "said once")
	assert.Contains(t, warned[0], "connection refused")

	sd.down = false
	require.NoError(t, p.r.Flush())
	assert.Equal(t, withUnits(map[string]string{"system.slice": "0-5", "init.scope": "0-5"}), sd.units())

	// A restart without the feature while systemd is away: the records
	// stay until the restore can be made.
	sd.down = true
	q := n.startSystemd(t, sd, hostfiles.OS{})
	assert.Error(t, q.r.Flush(), "the restore failed: retried")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Contains(t, records, SystemdPath("system.slice"))
	assert.Equal(t, originals, n.files(t), "the mask is back all the same")
	sd.down = false
	require.NoError(t, q.r.Flush())
	assert.Equal(t, sdOriginals, sd.units())
}

// TestSystemdRefusal: systemd refusing the property (no CAP_SYS_ADMIN,
// no polkit rule) is a refusal like the kernel's: counted once, reported
// with a hint, not retried while the same value is wanted, and nothing
// to restore.
func TestSystemdRefusal(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	sd.setErr["system.slice"] = godbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied", Body: []any{"Access denied"}}
	p := n.startSystemd(t, sd, hostfiles.OS{})
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	sets := sd.sets
	require.NoError(t, p.r.Flush())
	assert.Equal(t, sets, sd.sets, "not retried")
	st := p.r.Status()
	assert.Equal(t, uint64(1), st.PermanentErrors)
	require.Len(t, st.Failures, 1)
	assert.Equal(t, SystemdPath("system.slice"), st.Failures[0].Path)
	assert.Contains(t, st.Failures[0].Error, "Access denied")
	assert.Contains(t, st.Failures[0].Hint, "CAP_SYS_ADMIN")
	assert.Equal(t, withUnits(map[string]string{"init.scope": "0-5"}), sd.units())
	assert.Equal(t, 2, st.Records[Owner], "the mask and init.scope; the refused unit was not changed")
}

// sdLife is TestKillAtEveryWrite's life under systemd.
var sdLife = []struct {
	held  cpuset.CPUSet
	units map[string]string
}{
	{cpuset.New(6, 7), withUnits(map[string]string{"system.slice": "0-5", "init.scope": "0-5"})},
	{cpuset.New(3, 6, 7), withUnits(map[string]string{"system.slice": "0-2,4-5", "init.scope": "0-2,4-5", "user.slice": "0-2"})},
	{cpuset.New(7), withUnits(map[string]string{"system.slice": "0-6", "init.scope": "0-6"})},
	{cpuset.New(), sdOriginals},
}

// TestSystemdKillAtEveryWrite kills the process at every mutating step
// (a journal write, the mask's, a unit property's; just before it and
// just after it) and starts another without the feature: every unit gets
// exactly its original AllowedCPUs back, and the journal is empty.
func TestSystemdKillAtEveryWrite(t *testing.T) {
	live := func(t *testing.T, n *node, sd *fakeSystemd, fsys *crashfs.FS) int {
		sd.crash = fsys
		defer func() { sd.crash = nil }()
		p := n.startSystemd(t, sd, fsys)
		for i, step := range sdLife {
			p.keep.set(step.held)
			_ = p.r.Flush()
			if fsys.Crashed() {
				return i
			}
			require.Equal(t, step.units, sd.units(), "step %d", i)
		}
		return len(sdLife)
	}
	clean := &crashfs.FS{}
	require.Equal(t, len(sdLife), live(t, sdNode(t), newFakeSystemd(), clean))
	steps := clean.Mutations()
	require.Greater(t, steps, 10)
	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("write %d %s", k, map[bool]string{false: "before", true: "after"}[after]), func(t *testing.T) {
				n, sd := sdNode(t), newFakeSystemd()
				fsys := &crashfs.FS{CrashAt: k, After: after}
				live(t, n, sd, fsys)
				require.True(t, fsys.Crashed())
				p := n.startSystemd(t, sd, hostfiles.OS{})
				require.NoError(t, p.r.Flush())
				assert.Equal(t, sdOriginals, sd.units(), "every unit exactly as it was")
				assert.Equal(t, originals, n.files(t))
				records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
				require.NoError(t, err)
				assert.Empty(t, records)
			})
		}
	}
}

// TestSystemdMask: systemd's CPU sets on D-Bus are little-endian bit
// masks, byte n bit i for CPU 8n+i; the empty set is an empty array.
func TestSystemdMask(t *testing.T) {
	assert.Equal(t, []byte{0x3f}, setToMask(cpuset.New(0, 1, 2, 3, 4, 5)))
	assert.Equal(t, []byte{0x01, 0x02, 0, 0, 0, 0, 0, 0x80}, setToMask(cpuset.New(0, 9, 63)))
	assert.Equal(t, []byte{}, setToMask(cpuset.New()))
	assert.Equal(t, "0,9,63", maskToSet([]byte{0x01, 0x02, 0, 0, 0, 0, 0, 0x80}).String())
	assert.Equal(t, "", maskToSet(nil).String())
	assert.Equal(t, "Slice", unitType("system.slice"))
	assert.Equal(t, "Scope", unitType("init.scope"))
	_, ok := systemdUnit(SystemdPath("system.slice"))
	assert.True(t, ok)
	_, ok = systemdUnit("/sys/fs/cgroup/system.slice/cpuset.cpus")
	assert.False(t, ok)
}

// TestDomainIsolatedLeftOut: CPUs isolcpus= took out of the scheduler's
// domains are never given to the host's units or cgroups (a cpuset change
// resets their tasks' affinity to it, which would move host processes
// onto isolated CPUs), unless nothing else is left.
func TestDomainIsolatedLeftOut(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	p := n.startSystemd(t, sd, hostfiles.OS{})
	p.src.cfg.DomainIsolated = cpuset.New(2, 3)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, withUnits(map[string]string{"system.slice": "0-1,4-5", "init.scope": "0-1,4-5", "user.slice": "0-1"}), sd.units())
	assert.Equal(t, "3e", n.read(t, "wq"), "the mask: the set, from its original")

	q := newNode(t)
	c := q.start(t, hostfiles.OS{}, 1)
	c.src.cfg.DomainIsolated = n.online
	c.keep.set(cpuset.New(6, 7))
	require.NoError(t, c.r.Flush())
	assert.Equal(t, "0-5", q.read(t, "system/cpuset.cpus"), "every CPU isolated (the floor leaves a CPU that is not, when there is one): the set as it is")
}

// populatedFS refuses to empty a cpuset.cpus, as the kernel does for a
// cgroup with tasks (ENOSPC).
type populatedFS struct{ hostfiles.OS }

func (f populatedFS) WriteFile(path string, data []byte) error {
	if strings.HasSuffix(path, "/cpuset.cpus") && strings.TrimSpace(string(data)) == "" {
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	return f.OS.WriteFile(path, data)
}

// TestUnsetStaleCgroupWithTasks: a unit's stale cpuset.cpus that the
// kernel will not empty gets the root's CPUs, which an empty one inherits.
func TestUnsetStaleCgroupWithTasks(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	require.NoError(t, os.WriteFile(filepath.Join(n.cgroup, "cpuset.cpus.effective"), []byte("0-7\n"), 0o644))
	p := n.startSystemd(t, sd, populatedFS{})
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	stale := filepath.Join(n.cgroup, "system.slice", "cpuset.cpus")
	require.NoError(t, os.WriteFile(stale, []byte("0-5\n"), 0o644))
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, sdOriginals, sd.units())
	data, err := os.ReadFile(stale)
	require.NoError(t, err)
	assert.Equal(t, "0-7\n", string(data))
}

// TestSystemdPodSliceBelowACgroupRootLeftAlone: a kubelet with the systemd
// cgroup driver and --cgroup-root=/custom.slice puts the pods in
// custom.slice/custom-kubepods.slice (its slice names repeat their
// parents'), made at its start: custom.slice is the pods' tree before the
// first pod's sandbox names it and after the last one's is gone. Given
// AllowedCPUs= without the pools' CPUs, the exclusive containers below
// it would run on the host's CPUs instead of theirs.
func TestSystemdPodSliceBelowACgroupRootLeftAlone(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	require.NoError(t, os.MkdirAll(filepath.Join(n.cgroup, "custom.slice", "custom-kubepods.slice"), 0o755))
	sd.allowed["custom.slice"] = setToMask(cpuset.New())
	p := n.startSystemd(t, sd, hostfiles.OS{})
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", sd.units()["system.slice"])
	assert.Equal(t, "", sd.units()["custom.slice"], "the slice holding the pods' tree is not touched")
	for _, problem := range p.src.Problems() {
		assert.NotContains(t, problem, "custom", "not a problem: nothing to confine there")
	}
}

// TestSystemdPodSliceTwoSlicesBelowACgroupRootLeftAlone: with the
// systemd driver and --cgroup-root=/custom-nodes.slice, the pods are in
// custom.slice/custom-nodes.slice/custom-nodes-kubepods.slice: the
// top-level custom.slice holds the pods' tree two slices down, and
// AllowedCPUs= on it would bound every exclusive container below it to
// the host's CPUs as well.
func TestSystemdPodSliceTwoSlicesBelowACgroupRootLeftAlone(t *testing.T) {
	n, sd := sdNode(t), newFakeSystemd()
	require.NoError(t, os.MkdirAll(filepath.Join(n.cgroup, "custom.slice", "custom-nodes.slice", "custom-nodes-kubepods.slice"), 0o755))
	sd.allowed["custom.slice"] = setToMask(cpuset.New())
	p := n.startSystemd(t, sd, hostfiles.OS{})
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", sd.units()["system.slice"])
	assert.Equal(t, "", sd.units()["custom.slice"], "the slice holding the pods' tree is not touched")
}
