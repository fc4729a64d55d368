package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

const (
	cpuDir  = "sys/devices/system/cpu"
	nodeDir = "sys/devices/system/node"
)

// reader resolves every path below one root and reports errors with the
// full file name, so a broken fixture or kernel says which file is wrong.
type reader struct{ root string }

func (r reader) path(rel string) string { return filepath.Join(r.root, rel) }

// text returns a file's trimmed content; ok is false when it does not exist.
func (r reader) text(rel string) (string, bool, error) {
	b, err := os.ReadFile(r.path(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading %s: %w", r.path(rel), err)
	}
	return strings.TrimSpace(string(b)), true, nil
}

// list reads a kernel CPU/node list file ("0-3,8"); a missing file is an
// empty set with ok=false.
func (r reader) list(rel string) (cpuset.CPUSet, bool, error) {
	s, ok, err := r.text(rel)
	if err != nil || !ok {
		return cpuset.New(), ok, err
	}
	set, err := cpulist.Parse(s)
	if err != nil {
		return cpuset.New(), true, fmt.Errorf("%s: %w", r.path(rel), err)
	}
	return set, true, nil
}

// integer reads a file holding one integer; ok is false when it is missing.
func (r reader) integer(rel string) (int64, bool, error) {
	s, ok, err := r.text(rel)
	if err != nil || !ok {
		return 0, ok, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%s: %q is not an integer", r.path(rel), s)
	}
	return v, true, nil
}

// Discover reads the topology of the node whose sysfs and procfs live below
// root ("/" for the real node).
func Discover(root string) (*Topology, error) {
	r := reader{root: root}
	present, ok, err := r.list(cpuDir + "/present")
	if err != nil {
		return nil, err
	}
	if !ok || present.IsEmpty() {
		return nil, fmt.Errorf("%s: missing or empty; is %q a sysfs root?", r.path(cpuDir+"/present"), root)
	}
	online, ok, err := r.list(cpuDir + "/online")
	if err != nil {
		return nil, err
	}
	if !ok {
		online = present
	}
	online = online.Intersection(present)
	possible, _, err := r.list(cpuDir + "/possible")
	if err != nil {
		return nil, err
	}
	t := &Topology{Present: present, Online: online, Offline: present.Difference(online), Possible: possible.Union(present)}

	if smt, ok, err := r.integer(cpuDir + "/smt/active"); err != nil {
		return nil, err
	} else {
		t.SMTActive = ok && smt == 1
	}
	if control, ok, err := r.text(cpuDir + "/smt/control"); err != nil {
		return nil, err
	} else if ok {
		t.SMTControl = control
	}

	for _, id := range present.List() {
		c, err := readCPU(r, id, online.Contains(id))
		if err != nil {
			return nil, err
		}
		t.CPUs = append(t.CPUs, c)
	}
	groupCaches(t.CPUs, cpuset.New(), nil, func(c *CPU) cpuset.CPUSet { return c.L2Cache.SharedCPUs }, func(c *CPU, v int) { c.L2 = v })
	groupCaches(t.CPUs, cpuset.New(), nil, func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }, func(c *CPU, v int) { c.L3 = v })
	assignCoreIndexes(t.CPUs)

	if err := readNUMA(r, t); err != nil {
		return nil, err
	}
	if err := readIsolated(r, t); err != nil {
		return nil, err
	}
	return t, nil
}

func readCPU(r reader, id int, online bool) (CPU, error) {
	dir := fmt.Sprintf("%s/cpu%d", cpuDir, id)
	noCache := Cache{ID: Unknown, SharedCPUs: cpuset.New()}
	c := CPU{ID: id, Online: online, Socket: Unknown, Die: Unknown, Cluster: Unknown,
		CoreID: Unknown, Core: Unknown, L2: Unknown, L3: Unknown, NUMA: Unknown, Siblings: cpuset.New(id),
		L2Cache: noCache, L3Cache: noCache}
	if _, err := os.Stat(r.path(dir)); err != nil {
		return c, fmt.Errorf("CPU %d is listed in %s but %s is missing: %w", id, r.path(cpuDir+"/present"), r.path(dir), err)
	}
	if !online {
		// The kernel removes topology and cache directories of offline CPUs.
		return c, nil
	}
	ints := []struct {
		file     string
		dst      *int
		required bool
	}{
		{"topology/physical_package_id", &c.Socket, true},
		{"topology/core_id", &c.CoreID, true},
		{"topology/die_id", &c.Die, false},
		{"topology/cluster_id", &c.Cluster, false},
	}
	for _, f := range ints {
		v, ok, err := r.integer(dir + "/" + f.file)
		if err != nil {
			return c, err
		}
		if !ok && f.required {
			return c, fmt.Errorf("%s: file missing for online CPU %d", r.path(dir+"/"+f.file), id)
		}
		if ok {
			*f.dst = int(v)
		}
	}
	if c.Die == Unknown {
		c.Die = 0
	}
	// core_cpus_list replaced thread_siblings_list in Linux 5.7; read either.
	sib, ok, err := r.list(dir + "/topology/core_cpus_list")
	if err != nil {
		return c, err
	}
	if !ok {
		if sib, ok, err = r.list(dir + "/topology/thread_siblings_list"); err != nil {
			return c, err
		}
	}
	if ok {
		c.Siblings = sib.Union(cpuset.New(id))
	}

	c.L2Cache, c.L3Cache, err = readCaches(r, dir, id)
	if err != nil {
		return c, err
	}
	for _, f := range []struct {
		file string
		dst  *int64
	}{{"cpufreq/base_frequency", &c.BaseFreqKHz}, {"cpufreq/cpuinfo_max_freq", &c.MaxFreqKHz}} {
		v, _, err := r.integer(dir + "/" + f.file)
		if err != nil {
			return c, err
		}
		*f.dst = v
	}
	return c, nil
}

// readCaches reads the CPU's unified L2 and L3 caches. Their
// shared_cpu_list (unlike the optional id file) identifies a cache across
// the node, so it is what groups CPUs.
func readCaches(r reader, dir string, id int) (l2, l3 Cache, err error) {
	l2 = Cache{ID: Unknown, SharedCPUs: cpuset.New()}
	l3 = Cache{ID: Unknown, SharedCPUs: cpuset.New()}
	entries, err := os.ReadDir(r.path(dir + "/cache"))
	if errors.Is(err, fs.ErrNotExist) {
		return l2, l3, nil
	}
	if err != nil {
		return l2, l3, fmt.Errorf("reading %s: %w", r.path(dir+"/cache"), err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		idx := dir + "/cache/" + e.Name()
		level, ok, err := r.integer(idx + "/level")
		if err != nil {
			return l2, l3, err
		}
		if !ok {
			continue // an index without a level says nothing; the next may
		}
		typ, _, err := r.text(idx + "/type")
		if err != nil {
			return l2, l3, err
		}
		if typ == "Instruction" || (level != 2 && level != 3) {
			continue
		}
		c := Cache{ID: Unknown}
		shared, ok, err := r.list(idx + "/shared_cpu_list")
		if err != nil {
			return l2, l3, err
		}
		if !ok {
			shared = cpuset.New(id)
		}
		c.SharedCPUs = shared
		if cid, ok, err := r.integer(idx + "/id"); err != nil {
			return l2, l3, err
		} else if ok {
			c.ID = int(cid)
		}
		if level == 2 {
			l2 = c
		} else {
			l3 = c
		}
	}
	return l2, l3, nil
}

// assignCoreIndexes gives every physical core a node-wide unique index: the
// kernel's core_id repeats across packages (and dies), so the key is the
// package, die and core_id together.
func assignCoreIndexes(cpus []CPU) {
	assignCoreIndexesWith(cpus, func(c *CPU) bool { return c.Online })
}

// assignCoreIndexesWith numbers the cores of the CPUs whose place is
// known (known).
func assignCoreIndexesWith(cpus []CPU, known func(*CPU) bool) {
	type key struct{ socket, die, core int }
	index := map[key]int{}
	for i := range cpus {
		c := &cpus[i]
		if !known(c) {
			continue
		}
		k := key{c.Socket, c.Die, c.CoreID}
		v, ok := index[k]
		if !ok {
			v = len(index)
			index[k] = v
		}
		c.Core = v
	}
}

func readNUMA(r reader, t *Topology) error {
	entries, err := os.ReadDir(r.path(nodeDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", r.path(nodeDir), err)
	}
	hasMemory, hasMemoryKnown, err := r.list(nodeDir + "/has_memory")
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "node") {
			continue
		}
		id, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
		if err != nil {
			continue
		}
		dir := nodeDir + "/" + name
		cpus, _, err := r.list(dir + "/cpulist")
		if err != nil {
			return err
		}
		n := NUMANode{ID: id, CPUs: cpus}
		if d, ok, err := r.text(dir + "/distance"); err != nil {
			return err
		} else if ok {
			for _, f := range strings.Fields(d) {
				v, err := strconv.Atoi(f)
				if err != nil {
					return fmt.Errorf("%s: malformed distance %q", r.path(dir+"/distance"), f)
				}
				n.Distance = append(n.Distance, v)
			}
		}
		if mi, ok, err := r.text(dir + "/meminfo"); err != nil {
			return err
		} else if ok {
			n.MemTotalKB = memTotalKB(mi)
		}
		if n.HugePages, err = readNodeHugePages(r, dir); err != nil {
			return err
		}
		if hasMemoryKnown {
			n.HasMemory = hasMemory.Contains(id)
		} else {
			n.HasMemory = n.MemTotalKB > 0
		}
		t.NUMANodes = append(t.NUMANodes, n)
	}
	sort.Slice(t.NUMANodes, func(i, j int) bool { return t.NUMANodes[i].ID < t.NUMANodes[j].ID })
	if len(t.NUMANodes) == 0 {
		// A kernel without CONFIG_NUMA: the whole machine is node 0.
		t.NUMANodes = []NUMANode{{ID: 0, CPUs: t.Present, Distance: []int{10}, HasMemory: true}}
	}
	for i := range t.CPUs {
		for _, n := range t.NUMANodes {
			if n.CPUs.Contains(t.CPUs[i].ID) {
				t.CPUs[i].NUMA = n.ID
			}
		}
	}
	return nil
}

// memTotalKB extracts "Node 0 MemTotal:  16318852 kB".
func memTotalKB(meminfo string) int64 {
	for _, line := range strings.Split(meminfo, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "MemTotal:" {
				v, _ := strconv.ParseInt(f[i+1], 10, 64)
				return v
			}
		}
	}
	return 0
}

// readIsolated prefers the kernel's own isolated mask; it is empty when
// isolcpus= was given without the domain flag (e.g. only managed_irq), so
// then the command line is parsed.
func readIsolated(r reader, t *Topology) error {
	iso, ok, err := r.list(cpuDir + "/isolated")
	if err != nil {
		return err
	}
	t.Isolated, t.DomainIsolated = cpuset.New(), cpuset.New()
	if ok {
		t.DomainIsolated = iso
	}
	cmdline, hasCmdline, err := r.text("proc/cmdline")
	if err != nil {
		return err
	}
	if hasCmdline {
		domain, err := ParseIsolcpusDomain(cmdline)
		if err != nil {
			return fmt.Errorf("%s: %w", r.path("proc/cmdline"), err)
		}
		t.DomainIsolated = t.DomainIsolated.Union(domain)
	}
	if ok && !iso.IsEmpty() {
		t.Isolated, t.IsolatedSource = iso, "sysfs"
		return nil
	}
	if !hasCmdline {
		return nil
	}
	for _, param := range []string{"isolcpus", "nohz_full"} {
		set, found, err := ParseCmdlineCPUs(cmdline, param)
		if err != nil {
			return fmt.Errorf("%s: %w", r.path("proc/cmdline"), err)
		}
		if found && !set.IsEmpty() {
			t.Isolated, t.IsolatedSource = set, "cmdline "+param+"="
			return nil
		}
	}
	return nil
}

// ParseIsolcpusDomain returns the CPUs isolcpus= takes out of the
// scheduler's domains: all of its CPUs when it has no flags or the domain
// flag, none when its flags are only others (managed_irq, nohz).
func ParseIsolcpusDomain(cmdline string) (cpuset.CPUSet, error) {
	set, found, err := ParseCmdlineCPUs(cmdline, "isolcpus")
	if err != nil || !found {
		return cpuset.New(), err
	}
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break
		}
		v, ok := strings.CutPrefix(f, "isolcpus=")
		if !ok {
			continue
		}
		flags := 0
		for _, part := range strings.Split(v, ",") {
			if part == "" || part[0] >= '0' && part[0] <= '9' {
				continue
			}
			flags++
			if part == "domain" {
				return set, nil
			}
		}
		if flags == 0 {
			return set, nil
		}
		return cpuset.New(), nil
	}
	return cpuset.New(), nil
}

// ParseCmdlineCPUs finds param=... on a kernel command line and returns its
// CPU list, skipping isolcpus flags such as "managed_irq," "domain," or
// "nohz,". Parameters after a bare "--" belong to init and are ignored.
func ParseCmdlineCPUs(cmdline, param string) (cpuset.CPUSet, bool, error) {
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break
		}
		v, ok := strings.CutPrefix(f, param+"=")
		if !ok {
			continue
		}
		var lists []string
		for _, part := range strings.Split(v, ",") {
			if part == "" {
				continue
			}
			if part[0] >= '0' && part[0] <= '9' {
				lists = append(lists, part)
			} else if len(lists) > 0 {
				return cpuset.New(), true, fmt.Errorf("%s=%s: flag %q after the CPU list", param, v, part)
			}
		}
		set, err := cpulist.Parse(strings.Join(lists, ","))
		if err != nil {
			return cpuset.New(), true, fmt.Errorf("%s=%s: %w", param, v, err)
		}
		return set, true, nil
	}
	return cpuset.New(), false, nil
}
