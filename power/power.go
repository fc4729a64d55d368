// Package power applies power classes (config.PowerClass) to CPUs through
// the host files the kernel offers for them, and says which settings a
// node lacks.
//
// A class is a delta over the node as it booted: each setting it has is
// written to the files of the CPUs (or, for the uncore, of the dies) that
// have the class; what it does not set stays as it is. The Source is a
// hostfiles.Source, so every file's original is recorded durably before it
// is first changed and written back exactly when no class wants it any
// more, also after a kill -9 (package hostfiles).
//
// Files, below <sysfs root>/sys/devices/system/cpu:
//
//   - cpuN/power/pm_qos_resume_latency_us: resumeLatencyUS (a number of
//     µs, "0" no limit, "n/a" no wake-up latency). cpuidle's governors
//     skip every state whose exit latency exceeds it.
//   - cpuN/cpuidle/stateK/disable: "1" for each state named in
//     disabledIdleStates (by cpuidle/stateK/name).
//   - cpuN/cpufreq/ (a link to cpufreq/policyM; the policy's file is the
//     one changed, once for all its CPUs): scaling_governor,
//     scaling_min_freq and scaling_max_freq ("min", "max" and "base" read
//     cpuinfo_min_freq, cpuinfo_max_freq and base_frequency, and every
//     frequency is clamped to the CPU's range, as the kernel would),
//     energy_performance_preference.
//   - intel_uncore_frequency/package_PP_die_DD/{min,max}_freq_khz: the
//     uncore range of every die with a CPU of a class that sets it; when
//     classes on one die differ, the highest value wins (a die has one
//     uncore), clamped to the die's initial_{min,max}_freq_khz; the
//     maximum is raised to the minimum where they would cross.
//
// A setting whose file does not exist (a VM without cpufreq or cpuidle, a
// node without the uncore driver, an idle state the CPU does not have, a
// governor its driver does not offer) is left out and reported: by Check
// for the node (validate, and the daemon at start), and by each pass
// (logged once per class, setting and reason; counted for the metrics).
package power

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Owner is the Source's name in the journal of original values.
const Owner = "power"

// Setting names, as the class's config keys say them.
const (
	ResumeLatency      = "resumeLatencyUS"
	DisabledIdleStates = "disabledIdleStates"
	Governor           = "governor"
	MinFreq            = "minFreqKHz"
	MaxFreq            = "maxFreqKHz"
	EPP                = "energyPerformancePreference"
	UncoreMinFreq      = "uncoreMinFreqKHz"
	UncoreMaxFreq      = "uncoreMaxFreqKHz"
)

// Orders of the changes (hostfiles.Change.Order): a governor (like the
// files that depend on no other) is written before the frequencies and the
// preference it governs, and restored after them.
const (
	orderFirst = iota
	orderFrequency
	orderPreference
)

// Node is what a node offers for power classes: its sysfs tree and its
// CPUs. It reads the tree when asked and keeps nothing that can change.
type Node struct {
	// cpuRoot is <sysfs root>/sys/devices/system/cpu.
	cpuRoot string
	topo    *sysfs.Topology
}

// NewNode returns the node below a sysfs root.
func NewNode(sysfsRoot string, topo *sysfs.Topology) *Node {
	return &Node{cpuRoot: filepath.Join(sysfsRoot, "sys/devices/system/cpu"), topo: topo}
}

// Note is a setting of a class that cannot be applied on some CPUs (or
// dies): the reason says why, without naming CPUs, so that notes of many
// CPUs merge.
type Note struct {
	Class, Setting, Reason string
	CPUs                   cpuset.CPUSet
}

func (n Note) key() string { return n.Class + "\x00" + n.Setting + "\x00" + n.Reason }

// String says it for a log line.
func (n Note) String() string {
	return fmt.Sprintf("class %s: %s: %s (CPUs %s)", n.Class, n.Setting, n.Reason, n.CPUs)
}

// Check reports, for every class of the config, the settings this node
// cannot apply on some online CPU, as warnings keyed
// power.classes.<class>.<setting>. It reads the node's files.
func (n *Node) Check(cfg *config.Config) config.Problems {
	var p config.Problems
	consequence := "containers of the class start without it (power.unsupported: warn)"
	if cfg.Power.Unsupported == config.PowerUnsupportedRefuse {
		consequence = "containers of the class are refused (power.unsupported: refuse); CPUs a pool gives the class without a container (idle, shared, infra) go without it"
	}
	for _, note := range n.Unsupported(cfg) {
		p.Warnf("power.classes."+note.Class+"."+note.Setting, "%s on CPUs %s of this node; %s", note.Reason, note.CPUs, consequence)
	}
	return p
}

// Unsupported lists what Check reports, sorted by class and setting.
func (n *Node) Unsupported(cfg *config.Config) []Note {
	notes := newNotes()
	for _, name := range slices.Sorted(maps.Keys(cfg.Power.Classes)) {
		pc := cfg.Power.Classes[name]
		pl := newPlanner(n, notes) // each class as if every CPU had it
		for _, cpu := range n.topo.Online.List() {
			pl.cpu(cpu, name, pc)
		}
		pl.uncore()
	}
	return notes.list()
}

// Refusals maps each class to why a container of it is refused under
// power.unsupported: refuse (the first setting it lacks); nil otherwise.
func (n *Node) Refusals(cfg *config.Config) map[string]string {
	if cfg.Power.Unsupported != config.PowerUnsupportedRefuse {
		return nil
	}
	out := map[string]string{}
	for _, note := range n.Unsupported(cfg) {
		if _, ok := out[note.Class]; !ok {
			out[note.Class] = fmt.Sprintf("%s: %s on CPUs %s of this node", note.Setting, note.Reason, note.CPUs)
		}
	}
	return out
}

// notes merges the notes of a pass by class, setting and reason. A note
// gathers its CPUs in a list and makes their set once, in list: a set
// grown by a union per CPU made a new set per CPU of the note, and a pass
// adds a note per CPU of a class the node cannot give (issue 45: the
// power Source's allocations per pass grew with the CPUs in classes).
type notes struct {
	byKey map[noteKey]int // index in acc
	acc   []noteCPUs
}

type noteKey struct{ class, setting, reason string }

type noteCPUs struct {
	note Note
	cpus []int
}

func newNotes() *notes { return &notes{byKey: map[noteKey]int{}} }

func (ns *notes) add(class, setting, reason string, cpu int) {
	k := noteKey{class, setting, reason}
	if i, ok := ns.byKey[k]; ok {
		ns.acc[i].cpus = append(ns.acc[i].cpus, cpu)
		return
	}
	ns.byKey[k] = len(ns.acc)
	ns.acc = append(ns.acc, noteCPUs{note: Note{Class: class, Setting: setting, Reason: reason}, cpus: []int{cpu}})
}

func (ns *notes) list() []Note {
	out := make([]Note, 0, len(ns.acc))
	for _, a := range ns.acc {
		n := a.note
		n.CPUs = cpuset.New(a.cpus...)
		out = append(out, n)
	}
	slices.SortStableFunc(out, func(a, b Note) int {
		if c := strings.Compare(a.Class, b.Class); c != 0 {
			return c
		}
		return strings.Compare(a.Setting, b.Setting)
	})
	return out
}

// readText reads a sysfs file, trimmed; ok is false when it cannot be read.
func readText(path string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(data)), true
}

func readKHz(path string) (int64, bool) {
	return parseKHz(readText(path))
}

// parseKHz is a frequency file's text (ok: it was read) in kHz.
func parseKHz(s string, ok bool) (int64, bool) {
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v > 0
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// cpuInfo is a CPU's topology; ok is false for a CPU the node lacks.
func (n *Node) cpuInfo(cpu int) (sysfs.CPU, bool) {
	i, ok := slices.BinarySearchFunc(n.topo.CPUs, cpu, func(c sysfs.CPU, id int) int { return c.ID - id })
	if !ok {
		return sysfs.CPU{}, false
	}
	return n.topo.CPUs[i], true
}
