package hostfiles

// The pprof labels of a pass (internal/proflabel): a CPU profile of the
// daemon splits the host files' worker by the Source and the step that
// run, since a pass runs every Source in turn and the steps differ in
// what they cost (reads, writes, fsyncs).

import "github.com/cpupool/nri-cpupool/internal/proflabel"

// passLabels puts a pass's labels on its goroutine. Its zero value (a
// pass run outside the worker: Flush) labels nothing.
type passLabels struct {
	worker proflabel.Set
	// sets are the labels by Source and step, made once each: putting a
	// made one on does not allocate.
	sets map[[2]string]proflabel.Set
	at   [2]string // the labels on now
}

// enter labels the goroutine with the worker's labels and source (the
// owner; "" for a step the Sources share) and step.
func (l *passLabels) enter(source, step string) {
	key := [2]string{source, step}
	if l == nil || key == l.at {
		return
	}
	s, ok := l.sets[key]
	if !ok {
		s = l.worker.With(proflabel.KeyStep, step)
		if source != "" {
			s = s.With(proflabel.KeySource, source)
		}
		if l.sets == nil {
			l.sets = map[[2]string]proflabel.Set{}
		}
		l.sets[key] = s
	}
	s.Apply()
	l.at = key
}

// leave gives the goroutine back the worker's labels alone.
func (l *passLabels) leave() {
	if l == nil {
		return
	}
	l.worker.Apply()
	l.at = [2]string{}
}
