package handlerclock

import (
	"slices"
)

// Summary is what a Recorder's calls since some point show, for reading
// whether a phase's time was spent on a CPU (its thread CPU near its wall
// time: the code itself was slow) or off it (wall well above CPU, with
// involuntary switches: the kernel ran something else).
type Summary struct {
	// Seq is the calls recorded so far: give it as since to the next
	// Summary to cover only what follows.
	Seq uint64 `json:"seq"`
	// Calls is how many calls this summary covers; Lost, how many more it
	// should have covered but the ring no longer held.
	Calls int    `json:"calls"`
	Lost  uint64 `json:"lost"`
	// ThreadChanged and Incomplete count, since the start, the calls not
	// recorded (Recorder).
	ThreadChanged uint64 `json:"threadChanged"`
	Incomplete    uint64 `json:"incomplete"`
	// Phases are the handler's phases in order, then "total" (entry to
	// exit).
	Phases []PhaseSummary `json:"phases"`
	// InvoluntaryShare is the share of calls during which the thread was
	// preempted at least once; InvoluntaryPerCall the mean count.
	InvoluntaryShare   float64 `json:"involuntaryShare"`
	InvoluntaryPerCall float64 `json:"involuntaryPerCall"`
	// VoluntaryShare and VoluntaryPerCall are the same for switches the
	// thread asked for (it slept: a lock, a futex).
	VoluntaryShare   float64 `json:"voluntaryShare"`
	VoluntaryPerCall float64 `json:"voluntaryPerCall"`
	// MinorFaultsPerCall and MajorFaultsPerCall are the thread's page
	// faults per call.
	MinorFaultsPerCall float64 `json:"minorFaultsPerCall"`
	MajorFaultsPerCall float64 `json:"majorFaultsPerCall"`
	// MarkWallNs and MarkCPUNs are what one mark itself takes (measured
	// at the start): each phase's figures include one.
	MarkWallNs int64 `json:"markWallNs"`
	MarkCPUNs  int64 `json:"markCpuNs"`
}

// PhaseSummary is one phase's wall and thread CPU time over the calls, in
// microseconds.
type PhaseSummary struct {
	Name         string  `json:"name"`
	WallMedianUs float64 `json:"wallMedianUs"`
	WallMeanUs   float64 `json:"wallMeanUs"`
	CPUMedianUs  float64 `json:"cpuMedianUs"`
	CPUMeanUs    float64 `json:"cpuMeanUs"`
	// OffCPUMeanUs is the mean of wall less CPU: the time the thread was
	// not running during the phase.
	OffCPUMeanUs float64 `json:"offCpuMeanUs"`
}

// Summary summarizes the calls recorded after the first since (0: every
// call the ring still holds).
func (r *Recorder) Summary(since uint64) Summary {
	r.mu.Lock()
	seq := r.seq
	from := min(since, seq)
	var lost uint64
	if seq-from > ringSize {
		lost, from = seq-from-ringSize, seq-ringSize
	}
	recs := make([]record, 0, seq-from)
	for i := from; i < seq; i++ {
		recs = append(recs, r.ring[i%ringSize])
	}
	r.mu.Unlock()
	s := summarize(r.phases, recs)
	s.Seq, s.Lost = seq, lost
	s.ThreadChanged, s.Incomplete = r.threadChanged.Load(), r.incomplete.Load()
	s.MarkWallNs, s.MarkCPUNs = r.markCost[0], r.markCost[1]
	return s
}

// summarize computes the phases' figures and the per-call counts over
// recs, whose times are cumulative from the call's entry (record).
func summarize(phases []string, recs []record) Summary {
	s := Summary{Calls: len(recs)}
	n := len(phases)
	wall, cpu := make([]float64, len(recs)), make([]float64, len(recs))
	phase := func(name string, at func(r record) (wall, cpu int64)) {
		ps := PhaseSummary{Name: name}
		if len(recs) > 0 {
			for i, r := range recs {
				w, c := at(r)
				wall[i], cpu[i] = float64(w)/1e3, float64(c)/1e3
			}
			ps.WallMeanUs, ps.CPUMeanUs = mean(wall), mean(cpu)
			ps.OffCPUMeanUs = ps.WallMeanUs - ps.CPUMeanUs
			ps.WallMedianUs, ps.CPUMedianUs = median(wall), median(cpu)
		}
		s.Phases = append(s.Phases, ps)
	}
	for p := range n {
		phase(phases[p], func(r record) (int64, int64) {
			w, c := int64(r.wall[p]), int64(r.cpu[p])
			if p > 0 {
				w, c = w-int64(r.wall[p-1]), c-int64(r.cpu[p-1])
			}
			return w, c
		})
	}
	phase("total", func(r record) (int64, int64) { return int64(r.wall[n-1]), int64(r.cpu[n-1]) })
	if len(recs) == 0 {
		return s
	}
	var invol, involCalls, vol, volCalls, minor, major float64
	for _, r := range recs {
		invol += float64(r.involuntary)
		vol += float64(r.voluntary)
		minor += float64(r.minorFaults)
		major += float64(r.majorFaults)
		if r.involuntary > 0 {
			involCalls++
		}
		if r.voluntary > 0 {
			volCalls++
		}
	}
	calls := float64(len(recs))
	s.InvoluntaryShare, s.InvoluntaryPerCall = involCalls/calls, invol/calls
	s.VoluntaryShare, s.VoluntaryPerCall = volCalls/calls, vol/calls
	s.MinorFaultsPerCall, s.MajorFaultsPerCall = minor/calls, major/calls
	return s
}

func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// median sorts v and returns its middle (the mean of the two middle
// values when their number is even).
func median(v []float64) float64 {
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 0 {
		return (v[m-1] + v[m]) / 2
	}
	return v[m]
}
