package sysfs

// CPUs the hypervisor hot-removed (a vCPU unplug takes a CPU out of the
// present mask, and the kernel forgets where it sat). The config in force
// was written for the node with them, and the running daemon keeps their
// pools as they were (an offline CPU only leaves its pool). A restart, a
// reload and validate must lay the pools out the same way, so they carve
// on the node with the removed CPUs put back as offline CPUs, at the
// place they had: that place is remembered while they are present
// (Remember), in a node-local file beside the state file, and put back
// (WithRemembered). Only CPUs the kernel may still hot-add (in the
// possible mask) are put back: a CPU never seen present, a typo, stays
// one this node does not have.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// RememberedFile is the record's name, in the state file's directory.
const RememberedFile = "present-cpus.json"

// RememberedPath is where the record of a daemon with this state file is.
func RememberedPath(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), RememberedFile)
}

// RememberedCPU is where a CPU sat while it was present and online.
type RememberedCPU struct {
	ID       int    `json:"id"`
	Socket   int    `json:"socket"`
	Die      int    `json:"die"`
	Cluster  int    `json:"cluster"`
	CoreID   int    `json:"coreId"`
	NUMA     int    `json:"numa"`
	Siblings string `json:"siblings"`
	L2ID     int    `json:"l2Id"`
	L2CPUs   string `json:"l2CPUs"`
	L3ID     int    `json:"l3Id"`
	L3CPUs   string `json:"l3CPUs"`
	BaseKHz  int64  `json:"baseFrequencyKHz,omitempty"`
	MaxKHz   int64  `json:"maxFrequencyKHz,omitempty"`
}

// Remembered is the record: every CPU seen present and online, by ID.
type Remembered struct {
	Version int             `json:"version"`
	CPUs    []RememberedCPU `json:"cpus"`
}

// rememberedVersion is the record's format.
const rememberedVersion = 1

// Remember is prev with the place of every online CPU of t, which is
// what the kernel says now (a CPU may come back elsewhere); changed is
// false when that is prev already (nothing to write). Offline CPUs have
// no place to read and keep what prev says.
func (t *Topology) Remember(prev Remembered) (rec Remembered, changed bool) {
	byID := map[int]RememberedCPU{}
	for _, c := range prev.CPUs {
		if _, ok := byID[c.ID]; !ok && c.ID >= 0 { // as WithRemembered reads it
			byID[c.ID] = c
		}
	}
	for _, c := range t.CPUs {
		if !c.Online {
			continue
		}
		r := RememberedCPU{ID: c.ID, Socket: c.Socket, Die: c.Die, Cluster: c.Cluster, CoreID: c.CoreID, NUMA: c.NUMA,
			Siblings: c.Siblings.String(), L2ID: c.L2Cache.ID, L2CPUs: c.L2Cache.SharedCPUs.String(),
			L3ID: c.L3Cache.ID, L3CPUs: c.L3Cache.SharedCPUs.String(), BaseKHz: c.BaseFreqKHz, MaxKHz: c.MaxFreqKHz}
		if old, ok := byID[c.ID]; !ok || old != r {
			changed = true
		}
		byID[c.ID] = r
	}
	rec = Remembered{Version: rememberedVersion}
	for _, id := range slices.Sorted(func(yield func(int) bool) {
		for id := range byID {
			if !yield(id) {
				return
			}
		}
	}) {
		rec.CPUs = append(rec.CPUs, byID[id])
	}
	return rec, changed || prev.Version != rememberedVersion
}

// maxRememberedBytes bounds the record read: an entry is about 250 bytes,
// so this holds thousands of CPUs; a larger file is not this daemon's
// record, and is not read whole into memory.
const maxRememberedBytes = 4 << 20

// ReadRemembered reads the record; none is an empty one.
func ReadRemembered(path string) (Remembered, error) {
	var rec Remembered
	ok, err := atomicfile.ReadJSONLimit(path, maxRememberedBytes, &rec)
	switch {
	case errors.Is(err, atomicfile.ErrTooLarge):
		return Remembered{}, fmt.Errorf("%w: not a record of this daemon's", err)
	case errors.Is(err, atomicfile.ErrNotRegular):
		return Remembered{}, fmt.Errorf("%w: the record is a file the daemon writes; %s", err, rememberedFix)
	case err != nil:
		return Remembered{}, err
	case !ok:
		return Remembered{}, nil
	}
	if rec.Version != rememberedVersion {
		return Remembered{}, fmt.Errorf("%s: version %d, this release reads %d", path, rec.Version, rememberedVersion)
	}
	return rec, nil
}

// rememberedFix is how to end a record path that is not a regular file.
const rememberedFix = "remove it, and the daemon writes the record there at its next start or CPU change"

// WriteRemembered replaces the record atomically. A directory at path
// cannot be replaced (os.Rename says only "file exists"): that is said as
// what it is, with the way out, as ReadRemembered says it (ErrNotRegular).
func WriteRemembered(path string, rec Remembered) error {
	if st, err := os.Lstat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s: a directory, %w; not written: the record is a file the daemon writes; %s", path, atomicfile.ErrNotRegular, rememberedFix)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return atomicfile.Replace(path, data, true)
}

// WithRemembered is t with the remembered CPUs the kernel no longer has
// present but may hot-add again (possible) put back as offline CPUs at the
// place they had (Absent lists them); t itself when there is none. Core
// and cache group indexes are numbered again over all CPUs, as Discover
// numbered them while the CPUs were present, so the pools are carved as
// they were then.
func (t *Topology) WithRemembered(rec Remembered) *Topology {
	back, _ := t.remembered(rec)
	if len(back) == 0 {
		return t
	}
	n := *t
	n.CPUs = append(slices.Clone(t.CPUs), back...)
	slices.SortFunc(n.CPUs, func(a, b CPU) int { return a.ID - b.ID })
	var ids []int
	for _, c := range back {
		ids = append(ids, c.ID)
	}
	n.Absent = t.Absent.Union(cpuset.New(ids...))
	n.Present, n.Offline = t.Present.Union(n.Absent), t.Offline.Union(n.Absent)
	n.NUMANodes = slices.Clone(t.NUMANodes)
	for i := range n.NUMANodes {
		for _, c := range back {
			if c.NUMA == n.NUMANodes[i].ID {
				n.NUMANodes[i].CPUs = n.NUMANodes[i].CPUs.Union(cpuset.New(c.ID))
			}
		}
	}
	// Cores first: an absent CPU that joins a present core takes that
	// core's cache groups.
	assignCoreIndexesWith(n.CPUs, func(c *CPU) bool { return c.Online || n.Absent.Contains(c.ID) })
	ownCores(n.CPUs, n.Absent)
	mates := coreMates(n.CPUs, n.Absent)
	groupCaches(n.CPUs, n.Absent, mates, func(c *CPU) cpuset.CPUSet { return c.L2Cache.SharedCPUs }, func(c *CPU, v int) { c.L2 = v })
	groupCaches(n.CPUs, n.Absent, mates, func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }, func(c *CPU, v int) { c.L3 = v })
	return &n
}

// coreMates are, for each absent CPU in a core with present threads (one
// ownCores let join it), those present threads.
func coreMates(cpus []CPU, absent cpuset.CPUSet) map[int]cpuset.CPUSet {
	present := map[int]cpuset.CPUSet{}
	for _, c := range cpus {
		if c.Core != Unknown && !absent.Contains(c.ID) {
			present[c.Core] = present[c.Core].Union(cpuset.New(c.ID))
		}
	}
	mates := map[int]cpuset.CPUSet{}
	for _, c := range cpus {
		if m, ok := present[c.Core]; ok && c.Core != Unknown && absent.Contains(c.ID) {
			mates[c.ID] = m
		}
	}
	return mates
}

// RememberedDropped says, one line per entry, which entries of a record
// (hand-edited, concatenated, from another shape of the machine)
// WithRemembered does not put back although their CPU is absent: a
// negative or repeated CPU id, a NUMA node the node does not have. For
// the reader of the record to say once.
func (t *Topology) RememberedDropped(rec Remembered) []string {
	_, dropped := t.remembered(rec)
	return dropped
}

// remembered are rec's CPUs to put back on t, and the entries dropped.
func (t *Topology) remembered(rec Remembered) (back []CPU, dropped []string) {
	possible := t.PossibleCPUs()
	nodes := map[int]bool{}
	for _, n := range t.NUMANodes {
		nodes[n.ID] = true
	}
	seen := map[int]bool{}
	for _, r := range rec.CPUs {
		switch {
		case r.ID < 0:
			dropped = append(dropped, fmt.Sprintf("CPU %d: a negative CPU id", r.ID))
			continue
		case seen[r.ID]:
			dropped = append(dropped, fmt.Sprintf("CPU %d: listed again (the first entry is kept)", r.ID))
			continue
		}
		seen[r.ID] = true
		if t.Present.Contains(r.ID) || !possible.Contains(r.ID) {
			continue
		}
		if len(nodes) > 0 && !nodes[r.NUMA] {
			dropped = append(dropped, fmt.Sprintf("CPU %d: on NUMA node %d, which this node does not have", r.ID, r.NUMA))
			continue
		}
		back = append(back, r.cpu())
	}
	return back, dropped
}

// ownCores gives an absent CPU a core of its own when its remembered
// siblings name no present CPU of the present core its remembered ids put
// it in, or one outside it, or when it would give that core more threads than any core
// of the node has (at least 2): a stale record, another shape of the
// machine. A present core keeps the threads the kernel gives it. The
// present threads' own entries need not list the absent CPU: the daemon
// remembers them again at each hotplug and Synchronize, as the kernel
// lists them, without their offline or removed siblings.
func ownCores(cpus []CPU, absent cpuset.CPUSet) {
	present := map[int]cpuset.CPUSet{}
	next := 0
	for i := range cpus {
		if cpus[i].Core == Unknown {
			continue
		}
		next = max(next, cpus[i].Core+1)
		if !absent.Contains(cpus[i].ID) {
			present[cpus[i].Core] = present[cpus[i].Core].Union(cpuset.New(cpus[i].ID))
		}
	}
	width := 2
	for _, members := range present {
		width = max(width, members.Size())
	}
	for i := range cpus {
		c := &cpus[i]
		if !absent.Contains(c.ID) || c.Core == Unknown {
			continue
		}
		members, ok := present[c.Core]
		if !ok {
			continue
		}
		// It must name a present thread of the core: an entry naming none
		// (a leftover of a VM reshaped to one thread per core) says
		// nothing of sharing one.
		listed := c.Siblings.Difference(absent)
		if listed.IsEmpty() || !listed.IsSubsetOf(members) || members.Size() >= width {
			c.Core = next
			next++
			continue
		}
		// The next absent CPU of this core counts this one.
		present[c.Core] = members.Union(cpuset.New(c.ID))
	}
}

// cpu is the remembered CPU as an offline CPU of the topology whose
// place is known.
func (r RememberedCPU) cpu() CPU {
	parse := func(s string, self int) cpuset.CPUSet {
		set, err := cpulist.Parse(s)
		if err != nil {
			return cpuset.New(self)
		}
		return set
	}
	return CPU{ID: r.ID, Socket: r.Socket, Die: r.Die, Cluster: r.Cluster, CoreID: r.CoreID, Core: Unknown,
		NUMA: r.NUMA, Siblings: parse(r.Siblings, r.ID).Union(cpuset.New(r.ID)), L2: Unknown, L3: Unknown,
		L2Cache: Cache{ID: r.L2ID, SharedCPUs: parse(r.L2CPUs, r.ID)}, L3Cache: Cache{ID: r.L3ID, SharedCPUs: parse(r.L3CPUs, r.ID)},
		BaseFreqKHz: r.BaseKHz, MaxFreqKHz: r.MaxKHz}
}
