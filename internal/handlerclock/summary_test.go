package handlerclock

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSummarizePhases: the phases' figures are the differences between
// consecutive marks (the record holds times since entry), their medians
// and means, and total the last mark's; the per-call counts are shares
// and means over the calls.
func TestSummarizePhases(t *testing.T) {
	us := func(v ...uint32) (out [MaxPhases]uint32) {
		for i, x := range v {
			out[i] = x * 1000
		}
		return out
	}
	recs := []record{
		{wall: us(10, 30, 60), cpu: us(5, 25, 30), involuntary: 1, minorFaults: 4},
		{wall: us(20, 40, 100), cpu: us(20, 30, 40), voluntary: 2, majorFaults: 1},
		{wall: us(30, 90, 93), cpu: us(10, 20, 23), involuntary: 3, minorFaults: 2},
	}
	s := summarize([]string{"a", "b", "c"}, recs)
	require.Equal(t, 3, s.Calls)
	require.Len(t, s.Phases, 4)
	// a: wall 10, 20, 30; cpu 5, 20, 10.
	assertPhase(t, PhaseSummary{Name: "a", WallMedianUs: 20, WallMeanUs: 20, CPUMedianUs: 10, CPUMeanUs: 35.0 / 3, OffCPUMeanUs: 20 - 35.0/3}, s.Phases[0])
	// b: wall 20, 20, 60; cpu 20, 10, 10.
	assertPhase(t, PhaseSummary{Name: "b", WallMedianUs: 20, WallMeanUs: 100.0 / 3, CPUMedianUs: 10, CPUMeanUs: 40.0 / 3, OffCPUMeanUs: 100.0/3 - 40.0/3}, s.Phases[1])
	// c: wall 30, 60, 3; cpu 5, 10, 3.
	assertPhase(t, PhaseSummary{Name: "c", WallMedianUs: 30, WallMeanUs: 31, CPUMedianUs: 5, CPUMeanUs: 6, OffCPUMeanUs: 25}, s.Phases[2])
	// total: wall 60, 100, 93; cpu 30, 40, 23.
	assertPhase(t, PhaseSummary{Name: "total", WallMedianUs: 93, WallMeanUs: 253.0 / 3, CPUMedianUs: 30, CPUMeanUs: 31, OffCPUMeanUs: 253.0/3 - 31}, s.Phases[3])
	assert.InDelta(t, 2.0/3, s.InvoluntaryShare, 1e-12)
	assert.InDelta(t, 4.0/3, s.InvoluntaryPerCall, 1e-12)
	assert.InDelta(t, 1.0/3, s.VoluntaryShare, 1e-12)
	assert.InDelta(t, 2.0/3, s.VoluntaryPerCall, 1e-12)
	assert.InDelta(t, 2.0, s.MinorFaultsPerCall, 1e-12)
	assert.InDelta(t, 1.0/3, s.MajorFaultsPerCall, 1e-12)
}

// assertPhase compares two phases' figures to within rounding.
func assertPhase(t *testing.T, want, got PhaseSummary) {
	t.Helper()
	assert.Equal(t, want.Name, got.Name)
	for _, f := range []struct {
		name      string
		want, got float64
	}{{"wall median", want.WallMedianUs, got.WallMedianUs}, {"wall mean", want.WallMeanUs, got.WallMeanUs},
		{"cpu median", want.CPUMedianUs, got.CPUMedianUs}, {"cpu mean", want.CPUMeanUs, got.CPUMeanUs},
		{"off-cpu mean", want.OffCPUMeanUs, got.OffCPUMeanUs}} {
		assert.InDelta(t, f.want, f.got, 1e-9, "%s: %s", want.Name, f.name)
	}
}

// TestSummarizeEvenMedian: with an even number of calls the median is
// the mean of the two middle ones.
func TestSummarizeEvenMedian(t *testing.T) {
	recs := []record{{}, {}, {}, {}}
	for i, w := range []uint32{40, 10, 30, 20} {
		recs[i].wall[0], recs[i].cpu[0] = w*1000, w*1000
	}
	s := summarize([]string{"only"}, recs)
	assert.Equal(t, 25.0, s.Phases[0].WallMedianUs)
	assert.Equal(t, 25.0, s.Phases[1].CPUMedianUs, "total is the only phase's")
}

// TestSummarizeNoCalls: no call gives zeros, not NaN (JSON cannot carry
// NaN).
func TestSummarizeNoCalls(t *testing.T) {
	s := summarize([]string{"a", "b"}, nil)
	assert.Equal(t, 0, s.Calls)
	assert.Equal(t, []PhaseSummary{{Name: "a"}, {Name: "b"}, {Name: "total"}}, s.Phases)
	assert.Zero(t, s.InvoluntaryShare)
}

// TestSummarySince: a summary since an earlier seq covers the calls after
// it alone; past the ring's size the oldest are counted lost.
func TestSummarySince(t *testing.T) {
	r, err := NewRecorder("a", "b")
	require.NoError(t, err)
	for i := range ringSize + 904 {
		var rec record
		rec.wall[1] = uint32(i) * 1000
		r.add(rec)
	}
	all := r.Summary(0)
	assert.Equal(t, uint64(ringSize+904), all.Seq)
	assert.Equal(t, ringSize, all.Calls)
	assert.Equal(t, uint64(904), all.Lost)
	last := r.Summary(all.Seq - 10)
	assert.Equal(t, 10, last.Calls)
	assert.Zero(t, last.Lost)
	// The last ten calls' totals are 4990 … 4999 µs.
	assert.Equal(t, float64(ringSize+904-5)+0.5-1, last.Phases[2].WallMedianUs)
	assert.Equal(t, 0, r.Summary(all.Seq).Calls)
	assert.Equal(t, 0, r.Summary(all.Seq+5).Calls, "a since past the end covers nothing")
}
