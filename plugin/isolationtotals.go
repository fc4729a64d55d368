package plugin

import "github.com/cpupool/nri-cpupool/hostfiles"

// hostFileTotals are the host files' counters (cpupool_host_file_*_total,
// cpupool_host_files_settled_total,
// cpupool_housekeeping_systemd_unreachable_total) that reconcilers closed
// before the running one counted. A reload or a hotplug makes a new
// reconciler, whose own counts start at zero; exported alone, they would
// fall, which Prometheus reads as a counter reset (and rate() as a
// restart). Each isolation carries the totals of those before it, so that
// one load of p.isolation gives both halves of a counter.
type hostFileTotals struct {
	writes, restores, transient, permanent uint64
	full, kicked, settled                  uint64
	systemdUnreachable                     uint64
}

// plus is t with a closed reconciler's final counts added.
func (t hostFileTotals) plus(st hostfiles.Status, systemdUnreachable uint64) hostFileTotals {
	t.writes += st.Writes
	t.restores += st.Restores
	t.transient += st.TransientErrors
	t.permanent += st.PermanentErrors
	t.full += st.FullPasses
	t.kicked += st.KickedPasses
	t.settled += st.Settled
	t.systemdUnreachable += systemdUnreachable
	return t
}

// totals is what iso's counters export: the counts of the reconcilers
// before it and its own so far.
func (iso *isolation) totals() hostFileTotals { return iso.totalsWith(iso.recon.Status()) }

// totalsWith is totals with iso's reconciler's status already read.
func (iso *isolation) totalsWith(st hostfiles.Status) hostFileTotals {
	var unreachable uint64
	if iso.housekeeping != nil {
		unreachable = iso.housekeeping.SystemdUnreachable()
	}
	return iso.before.Load().plus(st, unreachable)
}
