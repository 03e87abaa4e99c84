package load

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the q-th quantile (0..1) of sorted by nearest rank, or
// 0 for an empty slice.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Median returns the median of durations (which it sorts).
func Median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return Percentile(d, 0.5)
}

// Trend compares the start and the end of a series of samples taken at
// regular times: the mean of the first and of the last fifth, and the
// least-squares slope per minute.
type Trend struct {
	FirstMean, LastMean float64
	// SlopePerMinute is the fitted growth in the sample's unit per minute.
	SlopePerMinute float64
	// Grows is true when the last fifth's mean exceeds the first's by more
	// than the tolerance and the fitted slope is positive as well: both
	// must agree, so a single spike at the end is not growth and neither
	// is a slope fitted through noise.
	Grows bool
}

// AnalyseTrend fits values sampled at times (seconds since the start).
// Growth must exceed relTol (a fraction of the first fifth's mean) and
// absTol (in the sample's unit), whichever is larger.
func AnalyseTrend(times, values []float64, relTol, absTol float64) Trend {
	n := len(values)
	if n < 5 || len(times) != n {
		return Trend{}
	}
	fifth := n / 5
	var t Trend
	t.FirstMean = mean(values[:fifth])
	t.LastMean = mean(values[n-fifth:])
	mt, mv := mean(times), mean(values)
	var num, den float64
	for i := range values {
		num += (times[i] - mt) * (values[i] - mv)
		den += (times[i] - mt) * (times[i] - mt)
	}
	if den > 0 {
		t.SlopePerMinute = num / den * 60
	}
	tol := max(relTol*t.FirstMean, absTol)
	t.Grows = t.LastMean-t.FirstMean > tol && t.SlopePerMinute > 0
	return t
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
