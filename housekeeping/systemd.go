package housekeeping

// Housekeeping under systemd (issue 32): on cgroup v2, systemd owns the
// host's slices, and a cpuset.cpus written behind its back is undone at
// the next daemon-reload. So their AllowedCPUs= is set through systemd's
// D-Bus API, as a runtime property (SetUnitProperties with runtime=true:
// a drop-in in /run/systemd/system.control, gone at reboot like the
// journal's records of this boot).
//
// The properties go through the same journal of originals as the files:
// each one is a path below SystemdRoot, a directory of no file system,
// that SystemdFS reads and writes through D-Bus. The reconciler records
// the original AllowedCPUs durably before its first change, restores it
// exactly when no longer wanted, also by the next process after a kill
// -9, and counts refusals (systemd's AccessDenied) like the kernel's.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// SystemdRoot is where the journal keeps systemd's unit properties:
// SystemdRoot/<unit>/AllowedCPUs. No file system has it; SystemdFS serves
// it through D-Bus, never through the host's files.
const SystemdRoot = "/dbus/org.freedesktop.systemd1/unit"

// allowedCPUs is the one property housekeeping sets.
const allowedCPUs = "AllowedCPUs"

// unitSuffixes are the unit types that have a cgroup: a top-level cgroup
// named so is a unit systemd manages (a slice, or a scope or service
// directly in -.slice, such as init.scope).
var unitSuffixes = []string{".slice", ".scope", ".service", ".socket", ".mount", ".swap"}

// systemdTargets lists the host's top-level units housekeeping confines
// when systemd manages the cgroups: every unit directly below -.slice
// whose cgroup exists (it is active), not only system.slice, user.slice,
// machine.slice and init.scope: a slice a package creates (ceph.slice)
// holds host processes too, and once the units' AllowedCPUs= enable the
// cpuset controller at the root, the kernel resets the tasks of every
// other top-level cgroup to every CPU, isolcpus= ones included (issue 41,
// item 11). The pods' tree (kubepods.slice, kubepods, pods, and a slice
// that holds it: holdsPodTree) is the pools'. A top-level cgroup of
// another name is not systemd's: its threads are confined by affinity
// (threads.go). A unit that is a cpuset partition root has CPUs someone
// chose: skipped, with why.
func systemdTargets(cgroupRoot string, pods []string) (units []string, skipped map[string]string, err error) {
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the top-level units' cgroups: %w", err)
	}
	skipped = map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || slices.Contains(podTrees, name) || slices.Contains(pods, name) || !slices.Contains(unitSuffixes, path.Ext(name)) {
			continue
		}
		dir := filepath.Join(cgroupRoot, name)
		if holdsPodTree(dir) {
			continue // a kubelet's --cgroup-root: the pods' tree
		}
		if part, err := os.ReadFile(filepath.Join(dir, "cpuset.cpus.partition")); err == nil && strings.TrimSpace(string(part)) != "member" {
			skipped[dir] = fmt.Sprintf("it is a cpuset partition (%s), whose CPUs someone chose", strings.TrimSpace(string(part)))
			continue
		}
		units = append(units, name)
	}
	return units, skipped, nil
}

// SystemdPath is the journal's path of a unit's AllowedCPUs.
func SystemdPath(unit string) string { return path.Join(SystemdRoot, unit, allowedCPUs) }

// Bus is the part of go-systemd's D-Bus connection housekeeping uses
// (*dbus.Conn is one); tests give a fake.
type Bus interface {
	GetUnitTypePropertyContext(ctx context.Context, unit, unitType, propertyName string) (*sddbus.Property, error)
	SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, properties ...sddbus.Property) error
	Close()
}

// Dialer connects to systemd.
type Dialer func(ctx context.Context) (Bus, error)

// DialSystemd connects to systemd's private socket (/run/systemd/private,
// root only, there whenever systemd runs, with or without a D-Bus
// daemon), and to the system bus when that fails.
func DialSystemd(ctx context.Context) (Bus, error) {
	c, err := sddbus.NewSystemdConnectionContext(ctx)
	if err == nil {
		return c, nil
	}
	c, err2 := sddbus.NewSystemConnectionContext(ctx)
	if err2 != nil {
		return nil, fmt.Errorf("connecting to systemd: its private socket: %v; the system bus: %w", err, err2)
	}
	return c, nil
}

// SystemdFS is a hostfiles.FS that serves the paths below SystemdRoot
// through systemd's D-Bus API and every other path through FS; it is the
// reconciler's FS on every node, with systemd or not, and empties a
// top-level cgroup's cpuset.cpus as the kernel allows (emptyCPUs). It keeps
// one connection, dialled when first needed and again after a call
// failed. Every call has a deadline, so a hung systemd delays a
// background pass, never a container's reply (the reconciler's passes are
// off the reply path).
type SystemdFS struct {
	hostfiles.FS
	dial       Dialer
	timeout    time.Duration
	cgroupRoot string

	mu  sync.Mutex
	bus Bus
}

// NewSystemdFS serves SystemdRoot through dial's connections, every other
// path through fsys; cgroupRoot is where the units' cgroups are.
func NewSystemdFS(fsys hostfiles.FS, dial Dialer, cgroupRoot string) *SystemdFS {
	return &SystemdFS{FS: fsys, dial: dial, timeout: 5 * time.Second, cgroupRoot: cgroupRoot}
}

// systemdUnit is the unit of a path below SystemdRoot.
func systemdUnit(p string) (unit string, ok bool) {
	rel, found := strings.CutPrefix(path.Clean(p), SystemdRoot+"/")
	if !found {
		return "", false
	}
	unit, prop, found := strings.Cut(rel, "/")
	return unit, found && prop == allowedCPUs && unit != ""
}

// IsSystemdPath tells whether p names a unit property (SystemdRoot).
func IsSystemdPath(p string) bool {
	return p == SystemdRoot || strings.HasPrefix(path.Clean(p), SystemdRoot+"/")
}

// unitType is the D-Bus interface of a unit's cgroup properties.
func unitType(unit string) string {
	switch path.Ext(unit) {
	case ".scope":
		return "Scope"
	case ".service":
		return "Service"
	case ".socket":
		return "Socket"
	case ".mount":
		return "Mount"
	case ".swap":
		return "Swap"
	}
	return "Slice"
}

// Reachable connects to systemd if not connected: nil when its API can
// be used now.
func (f *SystemdFS) Reachable() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.connected()
	return err
}

// connected returns the connection, dialling it if needed. Called with mu.
func (f *SystemdFS) connected() (Bus, error) {
	if f.bus != nil {
		return f.bus, nil
	}
	// Not a context with a deadline: godbus closes a connection when the
	// context it was dialled with is done, so a cancelled one gave "use of
	// closed network connection" on the next call (seen in the VM suite).
	// Each call has its deadline instead.
	bus, err := f.dial(context.Background())
	if err != nil {
		return nil, err
	}
	f.bus = bus
	return bus, nil
}

// call runs fn on the connection; a failure other than systemd's answer
// drops the connection, so that the next call dials again (systemd
// re-executed, the bus restarted).
func (f *SystemdFS) call(fn func(ctx context.Context, bus Bus) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	bus, err := f.connected()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	err = fn(ctx, bus)
	if _, answered := dbusErrorName(err); err != nil && !answered {
		bus.Close()
		f.bus = nil
	}
	return err
}

// Close drops the connection.
func (f *SystemdFS) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bus != nil {
		f.bus.Close()
		f.bus = nil
	}
}

// ReadFile reads a unit's AllowedCPUs as a CPU list ("" when unset: the
// parent's CPUs), or a host file.
func (f *SystemdFS) ReadFile(p string) ([]byte, error) {
	unit, ok := systemdUnit(p)
	if !ok {
		if IsSystemdPath(p) {
			return nil, &pathError{op: "read", path: p, err: syscall.ENOENT}
		}
		return f.FS.ReadFile(p)
	}
	var mask []byte
	err := f.call(func(ctx context.Context, bus Bus) error {
		prop, err := bus.GetUnitTypePropertyContext(ctx, unit, unitType(unit), allowedCPUs)
		if err != nil {
			return err
		}
		v, ok := prop.Value.Value().([]byte)
		if !ok {
			return fmt.Errorf("%s is %s, not a byte array", allowedCPUs, prop.Value.Signature())
		}
		mask = v
		return nil
	})
	if err != nil {
		return nil, systemdError("reading", unit, err)
	}
	return []byte(maskToSet(mask).String()), nil
}

// WriteFile sets a unit's AllowedCPUs from a CPU list ("" unsets it) as
// a runtime property, or writes a host file.
func (f *SystemdFS) WriteFile(p string, data []byte) error {
	unit, ok := systemdUnit(p)
	if !ok {
		if IsSystemdPath(p) {
			return &pathError{op: "write", path: p, err: syscall.ENOENT}
		}
		if topLevelEmptyCPUs(f.cgroupRoot, p, data) {
			// An empty original put back (cgroupChange, without
			// systemd): the root's CPUs where the kernel refuses it,
			// the record kept.
			return restoreEmptyCPUs(f.FS, p)
		}
		return f.FS.WriteFile(p, data)
	}
	set, err := cpulist.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return &pathError{op: "write", path: p, err: fmt.Errorf("%w: %v", syscall.EINVAL, err)}
	}
	err = f.call(func(ctx context.Context, bus Bus) error {
		if err := bus.SetUnitPropertiesContext(ctx, unit, true, sddbus.Property{Name: allowedCPUs, Value: godbus.MakeVariant(setToMask(set))}); err != nil {
			return err
		}
		// systemd answers before it applies the property to the
		// cgroups (its realize queue, drained before it reads the next
		// request): the unit's cpuset, and the cpuset controller of its
		// siblings, whose changes reset their tasks' affinities. The
		// answer to one more request says it has, so that what the pass
		// writes after this (the threads' affinities) is not reset
		// behind it (seen in the VM: every loop on every CPU after the
		// restore). Its own error is not this write's.
		_, _ = bus.GetUnitTypePropertyContext(ctx, unit, unitType(unit), allowedCPUs)
		return nil
	})
	if err != nil {
		return systemdError("setting", unit, err)
	}
	if set.IsEmpty() {
		return f.unsetCgroup(unit)
	}
	return nil
}

// unsetCgroup empties a unit's cpuset.cpus once its AllowedCPUs= is
// unset. systemd (252) writes cpuset.cpus only while the unit needs the
// cpuset controller: unset, it no longer does, but the controller stays
// enabled when another cgroup needs it (a runtime's), and the file keeps
// the CPUs systemd wrote last, so the unit stayed confined (seen in the
// VM suite). An empty cpuset.cpus is what systemd itself writes for an
// unset AllowedCPUs=: every CPU of the parent; where the kernel refuses
// that (a cgroup with tasks), the parent's CPUs themselves (emptyCPUs;
// the units are at the top: the root's).
func (f *SystemdFS) unsetCgroup(unit string) error {
	if f.cgroupRoot == "" {
		return nil
	}
	file := path.Join(f.cgroupRoot, unit, "cpuset.cpus")
	data, err := f.FS.ReadFile(file)
	if err != nil || strings.TrimSpace(string(data)) == "" {
		return nil // no cpuset controller for it, or empty already
	}
	if _, err := emptyCPUs(f.FS, file); err != nil {
		return fmt.Errorf("unit %s: %s unset, widening %s (still %s): %w", unit, allowedCPUs, file, strings.TrimSpace(string(data)), err)
	}
	return nil
}

// pathError is an error with an errno for hostfiles.Classify, naming the
// unit.
type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// systemdError gives systemd's answers the errno hostfiles.Classify sorts
// by: a unit it does not know is gone (ENOENT), a refusal (no privilege,
// polkit) is permanent (EACCES), an argument it rejects too (EINVAL);
// anything else (no connection, a timeout) is transient.
func systemdError(op, unit string, err error) error {
	name, _ := dbusErrorName(err)
	var errno error
	switch name {
	case "org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed", "org.freedesktop.DBus.Error.UnknownObject":
		errno = syscall.ENOENT
	case "org.freedesktop.DBus.Error.AccessDenied", "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired", "org.freedesktop.systemd1.UnitMasked":
		errno = syscall.EACCES
	case "org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.PropertyReadOnly", "org.freedesktop.DBus.Error.NotSupported":
		errno = syscall.EINVAL
	}
	if errno == nil {
		return fmt.Errorf("systemd: %s %s of %s: %w", op, allowedCPUs, unit, err)
	}
	return fmt.Errorf("systemd: %s %s of %s: %w (%w)", op, allowedCPUs, unit, err, errno)
}

// maskToSet reads systemd's CPU set on D-Bus: a little-endian bit mask,
// bit i of byte n is CPU 8n+i (cpu_set_to_dbus).
func maskToSet(mask []byte) cpuset.CPUSet {
	var cpus []int
	for n, b := range mask {
		for i := range 8 {
			if b&(1<<i) != 0 {
				cpus = append(cpus, 8*n+i)
			}
		}
	}
	return cpuset.New(cpus...)
}

// setToMask is maskToSet's inverse; the empty set is an empty array,
// which resets the property.
func setToMask(set cpuset.CPUSet) []byte {
	list := set.List()
	if len(list) == 0 {
		return []byte{}
	}
	mask := make([]byte, list[len(list)-1]/8+1)
	for _, c := range list {
		mask[c/8] |= 1 << (c % 8)
	}
	return mask
}

// systemdChange narrows a unit's AllowedCPUs as cgroupChange narrows a
// cpuset.cpus: unset (every CPU of its parent) becomes the set, a set
// original loses what the set leaves out, and an original with no CPU of
// the set is refused rather than unset.
func systemdChange(unit string, set cpuset.CPUSet) hostfiles.Change {
	ch := narrowChange("unit "+unit+" "+allowedCPUs, set)
	ch.Path = SystemdPath(unit)
	return ch
}

// dbusErrorName is the name of the D-Bus error inside err: an answer of
// systemd's (godbus returns them as values, its own as pointers).
func dbusErrorName(err error) (string, bool) {
	var answer godbus.Error
	if errors.As(err, &answer) {
		return answer.Name, true
	}
	var p *godbus.Error
	if errors.As(err, &p) && p != nil {
		return p.Name, true
	}
	return "", false
}
