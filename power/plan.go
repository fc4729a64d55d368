package power

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
)

// planner turns CPUs' classes into the files to change.
type planner struct {
	n     *Node
	notes *notes
	// claims are the files wanted so far, by path: a cpufreq policy's
	// files are claimed by each of its CPUs.
	claims map[string]claim
	// dies are the uncore dies wanted so far, by directory name.
	dies map[string]*die
	// classOf is every CPU's class, known to the config (ok false: the
	// CPU has none): the class of a cpufreq policy's first CPU decides the
	// policy for all its CPUs. Nil plans each class as if every CPU had
	// it (Node.Unsupported).
	classOf func(cpu int) (class string, ok bool)
	// original returns the journal's original of a file the plugin has
	// changed (nil: none has been). A changed file that this pass does
	// not want is restored before the pass writes, so its content now
	// says nothing about what it will hold when the writes come.
	original func(path string) (string, bool)
	// pending: a file is left for a later pass (Plan.Pending), whose
	// reading of it will be its true original.
	pending bool
	// files keeps what describes the node's drivers between passes
	// (nodefiles.go); nil reads it every time.
	files *nodeFiles
	// held are the recorded preferences held at their current value with
	// no pass to repeat (restoredPreference), and why, by path.
	held map[string]string
}

// claim is one file's wanted value and who wants it.
type claim struct {
	value, class string
	cpu, order   int
}

// die is one uncore die's wanted range: the highest of its CPUs'
// classes' values.
type die struct {
	dir                string
	minKHz, maxKHz     int64
	minClass, maxClass string
	cpu                int
}

func newPlanner(n *Node, ns *notes) *planner {
	return &planner{n: n, notes: ns, claims: map[string]claim{}, dies: map[string]*die{}, held: map[string]string{}}
}

// claim wants value in path for cpu's class. Only a policy's or a die's
// files are claimed twice, by CPUs of one class (see cpufreq and
// uncore), with one value.
func (pl *planner) claim(path, value, class string, cpu, order int) {
	if _, ok := pl.claims[path]; !ok {
		pl.claims[path] = claim{value: value, class: class, cpu: cpu, order: order}
	}
}

// cpu plans one CPU's class.
func (pl *planner) cpu(cpu int, class string, pc config.PowerClass) {
	dir := filepath.Join(pl.n.cpuRoot, "cpu"+strconv.Itoa(cpu))
	if v := string(pc.ResumeLatencyUS); v != "" {
		path := filepath.Join(dir, "power/pm_qos_resume_latency_us")
		if pl.files.exist(path) {
			pl.claim(path, v, class, cpu, orderFirst)
		} else {
			pl.notes.add(class, ResumeLatency, "no power/pm_qos_resume_latency_us (the kernel exposes no PM QoS for the CPU)", cpu)
		}
	}
	if len(pc.DisabledIdleStates) > 0 {
		pl.idleStates(cpu, dir, class, pc.DisabledIdleStates)
	}
	if pc.Governor != "" || pc.MinFreqKHz != "" || pc.MaxFreqKHz != "" || pc.EnergyPerformancePreference != "" {
		pl.cpufreq(cpu, dir, class, pc)
	}
	if pc.UncoreMinFreqKHz > 0 || pc.UncoreMaxFreqKHz > 0 {
		pl.uncoreOf(cpu, class, pc)
	}
}

// idleStates disables the named states of the CPU.
func (pl *planner) idleStates(cpu int, dir, class string, names []string) {
	entries, err := pl.files.readDirNames(filepath.Join(dir, "cpuidle"))
	if err != nil {
		pl.notes.add(class, DisabledIdleStates, "no cpuidle (no idle driver: cpuidle/current_driver is none or the CPU has no cpuidle directory)", cpu)
		return
	}
	found := map[string]string{} // name → state directory
	for _, e := range entries {
		if !strings.HasPrefix(e, "state") {
			continue
		}
		if name, ok := pl.files.readText(filepath.Join(dir, "cpuidle", e, "name")); ok {
			if _, dup := found[name]; !dup {
				found[name] = filepath.Join(dir, "cpuidle", e)
			}
		}
	}
	for _, name := range names {
		state, ok := found[name]
		if !ok {
			pl.notes.add(class, DisabledIdleStates, fmt.Sprintf("no idle state %q (the CPU has %s)", name, strings.Join(slices.Sorted(maps.Keys(found)), ", ")), cpu)
			continue
		}
		pl.claim(filepath.Join(state, "disable"), "1", class, cpu, orderFirst)
	}
}

// cpufreq plans the governor, frequencies and preference of the CPU's
// policy. A policy shared by several CPUs (acpi-cpufreq on some machines)
// belongs to its first CPU (related_cpus): only that CPU's class sets it,
// whatever the class sets, and a first CPU without a class leaves it as
// the node has it. Planning it for whichever CPU asks first would let a
// tenant's class change the frequency of shared or infra CPUs; the other
// CPUs' classes are told.
func (pl *planner) cpufreq(cpu int, dir, class string, pc config.PowerClass) {
	noteAll := func(reason string) {
		for _, s := range []struct {
			setting string
			set     bool
		}{{Governor, pc.Governor != ""}, {MinFreq, pc.MinFreqKHz != ""}, {MaxFreq, pc.MaxFreqKHz != ""}, {EPP, pc.EnergyPerformancePreference != ""}} {
			if s.set {
				pl.notes.add(class, s.setting, reason, cpu)
			}
		}
	}
	policy, err := pl.files.evalSymlinks(filepath.Join(dir, "cpufreq"))
	if err != nil {
		noteAll("no cpufreq (no frequency scaling driver: a VM, or none loaded)")
		return
	}
	owner, ok := policyOwner(pl.files, policy)
	if !ok {
		noteAll(fmt.Sprintf("its cpufreq policy (%s) has no readable related_cpus, so its owner is unknown", filepath.Base(policy)))
		return
	}
	if owner != cpu && pl.classOf != nil {
		switch ownerClass, has := pl.classOf(owner); {
		case !has:
			noteAll(fmt.Sprintf("its cpufreq policy (%s) is shared with CPU %d, which has no power class: the policy stays as the node has it", filepath.Base(policy), owner))
			return
		case ownerClass != class:
			noteAll(fmt.Sprintf("its cpufreq policy (%s) is shared with CPU %d, whose class %s decides it", filepath.Base(policy), owner, ownerClass))
			return
		}
	}
	governor := ""
	if g := pc.Governor; g != "" {
		avail, _ := pl.files.readText(filepath.Join(policy, "scaling_available_governors"))
		if slices.Contains(strings.Fields(avail), g) {
			pl.claim(filepath.Join(policy, "scaling_governor"), g, class, cpu, orderFirst)
			governor = g
		} else {
			pl.notes.add(class, Governor, fmt.Sprintf("governor %s is not offered (scaling_available_governors: %s)", g, avail), cpu)
		}
	}
	lo, okLo := pl.files.readKHz(filepath.Join(policy, "cpuinfo_min_freq"))
	hi, okHi := pl.files.readKHz(filepath.Join(policy, "cpuinfo_max_freq"))
	resolve := func(setting string, f config.Frequency) (int64, bool) {
		if !okLo || !okHi {
			pl.notes.add(class, setting, "the policy has no cpuinfo_min_freq or cpuinfo_max_freq", cpu)
			return 0, false
		}
		switch string(f) {
		case config.FrequencyMin:
			return lo, true
		case config.FrequencyMax:
			return hi, true
		case config.FrequencyBase:
			base, ok := pl.files.readKHz(filepath.Join(policy, "base_frequency"))
			if !ok {
				pl.notes.add(class, setting, "base: the driver reports no base_frequency", cpu)
			}
			return min(max(base, lo), hi), ok
		}
		khz, _ := f.KHz()
		return min(max(khz, lo), hi), true
	}
	minKHz, minOK := int64(0), false
	if pc.MinFreqKHz != "" {
		minKHz, minOK = resolve(MinFreq, pc.MinFreqKHz)
	}
	if pc.MaxFreqKHz != "" {
		maxKHz, ok := resolve(MaxFreq, pc.MaxFreqKHz)
		if ok && minOK && minKHz > maxKHz {
			pl.notes.add(class, MinFreq, fmt.Sprintf("%s is %d kHz here, above %s (%d kHz)", pc.MinFreqKHz, minKHz, MaxFreq, maxKHz), cpu)
			minOK = false
		}
		if ok {
			pl.claim(filepath.Join(policy, "scaling_max_freq"), strconv.FormatInt(maxKHz, 10), class, cpu, orderFrequency)
		}
	}
	if minOK {
		pl.claim(filepath.Join(policy, "scaling_min_freq"), strconv.FormatInt(minKHz, 10), class, cpu, orderFrequency)
	}
	if epp := pc.EnergyPerformancePreference; epp != "" {
		pl.preference(cpu, policy, class, epp, governor)
	}
}

// preference plans the energy performance preference; governor is the
// governor the pass writes, if any. intel_pstate and amd-pstate refuse
// any preference but performance (EBUSY) while the governor is
// performance: a class that leaves the governor alone on a CPU whose
// governor will be performance when the pass writes (its original, if the
// plugin changed it and restores it now, else what it holds) goes
// without it.
func (pl *planner) preference(cpu int, policy, class, epp, governor string) {
	path := filepath.Join(policy, "energy_performance_preference")
	if !pl.files.exist(path) {
		pl.notes.add(class, EPP, "no energy_performance_preference (the driver has no EPP: acpi-cpufreq, or HWP off)", cpu)
		return
	}
	if _, err := strconv.Atoi(epp); err != nil {
		avail, _ := pl.files.readText(filepath.Join(policy, "energy_performance_available_preferences"))
		if !slices.Contains(strings.Fields(avail), epp) {
			pl.notes.add(class, EPP, fmt.Sprintf("preference %s is not offered (energy_performance_available_preferences: %s)", epp, avail), cpu)
			return
		}
	}
	if governor == "" && epp != "performance" && epp != "0" {
		govPath := filepath.Join(policy, "scaling_governor")
		governor, _ = readText(govPath)
		if orig, changed := pl.originalOf(govPath); changed {
			governor = orig
		}
		if governor == "performance" && pl.pinsPreference(policy) {
			pl.notes.add(class, EPP, "the governor is performance, under which the driver fixes the preference at performance", cpu)
			return
		}
	}
	// governor is now the one the policy has once the pass wrote, where
	// that is known. A pass that writes or keeps the performance
	// governor (a class that sets it writes out the performance
	// preference, the only one config allows with it) keeps the driver
	// showing performance: what the file shows is the want, not an
	// original to wait for; left for a later pass, it would be left at
	// every pass.
	if pl.hiddenByPerformance(path, governor) || pl.restoredBeforePerformance(path) {
		pl.pending = true
		return
	}
	pl.claim(path, epp, class, cpu, orderPreference)
}

// restoredBeforePerformance tells whether the preference at path is left
// unwanted for this pass so that its restore runs before the pass writes
// the performance governor: the plugin changed it (the journal holds an
// original other than performance) and this pass switches the policy's
// governor to performance from another one. intel_pstate and amd-pstate
// keep the preference a policy has when its governor becomes performance,
// to put it back when the governor leaves it, and refuse any other
// preference under performance (EBUSY). Written under the plugin's
// preference, the driver would remember that one: a release that
// restores performance as the governor (a node booted with it) could
// then never restore the preference, nor take it out of the driver's
// memory. Restored first (a pass restores before it writes), the
// preference is the node's own when the governor switches; the next pass
// (Plan.Pending) plans the class's preference under the performance
// governor, from what the file shows then.
func (pl *planner) restoredBeforePerformance(path string) bool {
	orig, recorded := pl.originalOf(path)
	if !recorded || orig == "performance" || orig == "0" {
		return false
	}
	govPath := filepath.Join(filepath.Dir(path), "scaling_governor")
	c, written := pl.claims[govPath]
	if !written || c.value != "performance" {
		return false
	}
	cur, _ := readText(govPath)
	return cur != "performance" && pl.pinsPreference(filepath.Dir(path))
}

// pinsPreference tells whether the driver of a cpufreq policy fixes its
// preference at performance under the performance governor, and refuses
// any other (EBUSY): intel_pstate and amd-pstate-epp, their active modes,
// whose performance is their own algorithm. In intel_pstate's passive
// mode (scaling_driver intel_cpufreq) performance is cpufreq's generic
// governor, and the preference reads and takes what is written. A
// scaling_driver that cannot be read counts as pinning, the cautious
// reading: a preference waits rather than being refused.
func (pl *planner) pinsPreference(policy string) bool {
	driver, ok := pl.files.readText(filepath.Join(policy, "scaling_driver"))
	return !ok || driver == "intel_pstate" || driver == "amd-pstate-epp"
}

// hiddenByPerformance tells whether the preference file at path cannot
// be read for its original now: it is not recorded yet, its policy's
// governor reads performance, and this pass puts another governor there
// (governor: the one it writes, if any; else the plugin's restore of its
// own performance governor). intel_pstate and amd-pstate show the
// preference as performance under that governor, and put the policy's own
// preference back only when the governor leaves it; journaling what the
// file shows now would make "performance" the original, restored when no
// class wants the file any more, and, written under the other governor
// before that governor's restore, kept by the driver as the policy's
// preference. This holds for a node booted with the performance governor
// (tuned's latency-performance) as for the plugin's own. The preference
// is planned by the next pass, from what the file shows then. The
// decision reads only the journal and the governor file: a process
// killed between the two passes decides the same way from them.
func (pl *planner) hiddenByPerformance(path, governor string) bool {
	if _, recorded := pl.originalOf(path); recorded {
		return false // its original was read under another governor
	}
	govPath := filepath.Join(filepath.Dir(path), "scaling_governor")
	if cur, _ := readText(govPath); cur != "performance" || !pl.pinsPreference(filepath.Dir(path)) {
		return false
	}
	if governor != "" {
		return governor != "performance" // this pass writes another one
	}
	orig, changed := pl.originalOf(govPath)
	return changed && orig != "performance" // this pass restores another one
}

// restoredPreference holds a preference the journal holds and no class
// wants, whose restore the driver would refuse now: its governor reads
// performance, under which intel_pstate and amd-pstate refuse any
// preference but performance (EBUSY). Restores run in descending Order,
// the preference before its governor; refused for now, it would hold
// back the governor's restore, and so be refused again at every pass, by
// every process (a class that sets the performance governor and, written
// out, the performance preference). Held as it reads for this pass, it
// lets the governor go first (the driver then puts the policy's own
// preference back itself), and the next pass restores it (Plan.Pending).
// A governor that stays performance (a class still wants it) keeps it
// held, without a pass to repeat: the governor's own release comes back
// here.
func (pl *planner) restoredPreference(path, original string) {
	if filepath.Base(path) != "energy_performance_preference" || original == "performance" || original == "0" {
		return
	}
	if _, wanted := pl.claims[path]; wanted {
		return
	}
	govPath := filepath.Join(filepath.Dir(path), "scaling_governor")
	if gov, _ := readText(govPath); gov != "performance" || !pl.pinsPreference(filepath.Dir(path)) {
		return
	}
	cur, ok := readText(path)
	if !ok {
		return
	}
	pl.claim(path, cur, "", -1, orderPreference)
	if c, wanted := pl.claims[govPath]; wanted {
		if c.value != "performance" {
			pl.pending = true
			return
		}
	} else if orig, changed := pl.originalOf(govPath); changed && orig != "performance" {
		pl.pending = true
		return
	}
	// No pass of this process restores it while the governor stays
	// performance (an admin's, the node's own, or a class's): said, so
	// that the record the journal keeps has a reason (Report.Held).
	why := fmt.Sprintf("the governor of %s is performance, under which the driver refuses any other preference (EBUSY)", filepath.Base(filepath.Dir(path)))
	if c, wanted := pl.claims[govPath]; wanted && c.class != "" {
		why += fmt.Sprintf(" (class %s sets it)", c.class)
	}
	pl.held[path] = why
}

// policyOwner is a cpufreq policy's first CPU: the lowest of its
// related_cpus (online or not, so that the owner does not change with
// hotplug).
func policyOwner(files *nodeFiles, policy string) (int, bool) {
	text, ok := files.readText(filepath.Join(policy, "related_cpus"))
	if !ok {
		return 0, false
	}
	owner, found := 0, false
	for _, f := range strings.Fields(text) {
		cpu, err := strconv.Atoi(f)
		if err != nil {
			return 0, false
		}
		if !found || cpu < owner {
			owner, found = cpu, true
		}
	}
	return owner, found
}

func (pl *planner) originalOf(path string) (string, bool) {
	if pl.original == nil {
		return "", false
	}
	return pl.original(path)
}

// uncoreOf adds the CPU's class to its die's uncore range.
func (pl *planner) uncoreOf(cpu int, class string, pc config.PowerClass) {
	c, ok := pl.n.cpuInfo(cpu)
	name := fmt.Sprintf("package_%02d_die_%02d", c.Socket, max(c.Die, 0))
	dir := filepath.Join(pl.n.cpuRoot, "intel_uncore_frequency", name)
	if !ok || !pl.files.exist(dir) {
		reason := "no intel_uncore_frequency driver (Intel server parts only; modprobe intel-uncore-frequency)"
		if pl.files.exist(filepath.Dir(dir)) {
			reason = "the uncore driver has no " + name
		}
		for _, s := range []struct {
			setting string
			khz     int64
		}{{UncoreMinFreq, pc.UncoreMinFreqKHz}, {UncoreMaxFreq, pc.UncoreMaxFreqKHz}} {
			if s.khz > 0 {
				pl.notes.add(class, s.setting, reason, cpu)
			}
		}
		return
	}
	d, ok := pl.dies[name]
	if !ok {
		d = &die{dir: dir, cpu: cpu}
		pl.dies[name] = d
	}
	if pc.UncoreMinFreqKHz > d.minKHz {
		d.minKHz, d.minClass = pc.UncoreMinFreqKHz, class
	}
	if pc.UncoreMaxFreqKHz > d.maxKHz {
		d.maxKHz, d.maxClass = pc.UncoreMaxFreqKHz, class
	}
}

// uncore claims the dies' ranges, clamped to what the die allows. A die
// has one range: the highest minimum and the highest maximum of its CPUs'
// classes. The driver writes either bound as it comes, so the planner
// keeps the minimum at or below the maximum itself: where they would
// cross (a class sets only the minimum, another only a lower maximum; or
// the die's own other bound is in the way) the floor wins, as the highest
// value does, and the maximum is raised to it. When both bounds are
// written and the new maximum is below the die's minimum now, the minimum
// is written first (Order), so that no write in between crosses them.
//
// A pass restores before it writes, and restores the maximum first: a
// bound the plugin changed and no class wants any more, whose original
// would cross the other bound as it is now, is held as it is for one pass
// (Plan.Pending) while the other bound moves; the next pass restores it.
// The dies the journal holds bounds of are planned too (restoredDie),
// so that their restores are checked when no class wants them.
func (pl *planner) uncore() {
	for _, name := range slices.Sorted(maps.Keys(pl.dies)) {
		d := pl.dies[name]
		lo, okLo := pl.files.readKHz(filepath.Join(d.dir, "initial_min_freq_khz"))
		hi, okHi := pl.files.readKHz(filepath.Join(d.dir, "initial_max_freq_khz"))
		clamp := func(v int64) int64 {
			if okLo {
				v = max(v, lo)
			}
			if okHi {
				v = min(v, hi)
			}
			return v
		}
		minPath, maxPath := filepath.Join(d.dir, "min_freq_khz"), filepath.Join(d.dir, "max_freq_khz")
		// left is what a bound no class sets holds once the pass has
		// written: its original when the plugin changed it (the pass
		// restores it first), else what it holds.
		left := func(path string) (int64, bool) {
			if orig, changed := pl.originalOf(path); changed {
				v, err := strconv.ParseInt(orig, 10, 64)
				return v, err == nil
			}
			return readKHz(path)
		}
		var minKHz, maxKHz int64
		maxClass := d.maxClass
		if d.minKHz > 0 {
			minKHz = clamp(d.minKHz)
		}
		if d.maxKHz > 0 {
			maxKHz = clamp(d.maxKHz)
		}
		switch {
		case minKHz > 0 && maxKHz > 0:
			if minKHz > maxKHz {
				maxKHz, maxClass = minKHz, d.minClass
			}
		case minKHz > 0:
			if cur, ok := left(maxPath); ok && minKHz > cur {
				maxKHz, maxClass = minKHz, d.minClass
			}
		case maxKHz > 0:
			if cur, ok := left(minPath); ok && maxKHz < cur {
				maxKHz = cur
			}
		}
		minOrder := orderFrequency
		curMin, okMin := readKHz(minPath)
		curMax, okMax := readKHz(maxPath)
		if okMin && minKHz > 0 && maxKHz > 0 && maxKHz < curMin {
			minOrder = orderFirst
		}
		// hold keeps a restored bound as it is for this pass.
		hold := func(path string, cur int64) {
			pl.claim(path, strconv.FormatInt(cur, 10), "", d.cpu, orderFrequency)
			pl.pending = true
		}
		origMin, restoreMin := pl.originalOf(minPath)
		origMax, restoreMax := pl.originalOf(maxPath)
		restoreMin, restoreMax = restoreMin && minKHz == 0, restoreMax && maxKHz == 0
		if o, err := strconv.ParseInt(origMax, 10, 64); restoreMax && err == nil && okMin && okMax && o < curMin {
			// Restored first, the maximum would fall below the
			// minimum: the minimum moves (is written or restored) first.
			hold(maxPath, curMax)
		} else if o, err := strconv.ParseInt(origMin, 10, 64); restoreMin && err == nil && okMax && okMin && o > curMax {
			// Restored before the maximum is written, the minimum
			// would rise above it.
			hold(minPath, curMin)
		}
		if minKHz > 0 {
			pl.claim(minPath, strconv.FormatInt(minKHz, 10), d.minClass, d.cpu, minOrder)
		}
		if maxKHz > 0 {
			pl.claim(maxPath, strconv.FormatInt(maxKHz, 10), maxClass, d.cpu, orderFrequency)
		}
	}
}

// restoredDie plans the uncore die of a bound the journal holds, so that
// uncore checks its restore when no class wants it.
func (pl *planner) restoredDie(path string) {
	dir := filepath.Dir(path)
	if filepath.Base(filepath.Dir(dir)) != "intel_uncore_frequency" {
		return
	}
	if _, ok := pl.dies[filepath.Base(dir)]; !ok {
		pl.dies[filepath.Base(dir)] = &die{dir: dir, cpu: -1}
	}
}

// changes are the claims as hostfiles changes, by path.
func (pl *planner) changes() []hostfiles.Change {
	out := make([]hostfiles.Change, 0, len(pl.claims))
	for _, path := range slices.Sorted(maps.Keys(pl.claims)) {
		c := pl.claims[path]
		value := c.value
		// KernelForm: drivers show some accepted values their own way
		// (acpi-cpufreq resolves a frequency to its table, intel_pstate
		// shows preference 128 as balance_performance, the uncore driver
		// drops what is below 100 MHz): such a file is not rewritten at
		// every rescan.
		out = append(out, hostfiles.Change{Path: path, Order: c.order, KernelForm: true, Want: func(string) (string, error) { return value, nil }})
	}
	return out
}
