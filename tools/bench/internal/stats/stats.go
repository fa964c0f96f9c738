// Package stats: the latency histogram and the quantiles the peers report, computed as their
// C++ counterparts (tools/bench/bench_util.h) compute them.
package stats

import (
	"math/bits"
	"slices"
	"time"
)

// Histogram of non-negative values (ns): log-linear, 32 sub-buckets per power of two (at most
// ~3% relative error), the bucketing of bench_util.h's Histogram. Not safe for concurrent use.
type Histogram struct {
	counts [histBuckets]uint64
	Total  uint64
}

const (
	histSub     = 5
	histBuckets = (64 - histSub + 1) << histSub
)

func histIndex(v uint64) int {
	if v < 1<<histSub {
		return int(v)
	}
	msb := 63 - bits.LeadingZeros64(v)
	shift := msb - histSub
	return ((shift + 1) << histSub) + int((v>>uint(shift))&(1<<histSub-1))
}

func histUpper(i int) int64 {
	if i < 1<<histSub {
		return int64(i)
	}
	shift := (i >> histSub) - 1
	mant := uint64(1<<histSub) | uint64(i&(1<<histSub-1))
	return int64(((mant + 1) << uint(shift)) - 1)
}

// Add records v (negative values count as 0).
func (h *Histogram) Add(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(uint64(v))]++
	h.Total++
}

// Merge adds o's counts.
func (h *Histogram) Merge(o *Histogram) {
	for i := range h.counts {
		h.counts[i] += o.counts[i]
	}
	h.Total += o.Total
}

// Quantile is the upper bound of the bucket holding the q-quantile; 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.Total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Total-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return histUpper(i)
		}
	}
	return histUpper(histBuckets - 1)
}

// Quantile of v: the sorted value at the rounded rank q x (n - 1); -1 when v is empty.
func Quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// Median of d (the mean of the middle two when even); d must not be empty.
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Min of d; d must not be empty.
func Min(d []time.Duration) time.Duration { return slices.Min(d) }
