package hostfiles

// RestoreAlsoWhere admits, besides the roots of RestoreOnlyUnder, the
// journal records of files a rule accepts: files with a fixed shape but no
// common directory to confine them to (a network device's rps_cpus lies
// under its device's directory, anywhere below /sys/devices, and a root
// that wide would let a forged journal write any device file). A rule gets
// a clean path, lexically and once its symlinks are resolved, and must
// accept both for the record to be restored. It has no effect without
// RestoreOnlyUnder (nothing is confined then). Call it before Start and
// Flush.
func (r *Reconciler) RestoreAlsoWhere(rules ...func(path string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append(r.rules, rules...)
}

// admitted tells whether a rule of RestoreAlsoWhere accepts path.
func (r *Reconciler) admitted(path string) bool {
	for _, rule := range r.rules {
		if rule(path) {
			return true
		}
	}
	return false
}
