package pgvec

import "testing"

// TestExactScan: the plan by the tenant's size and the caller's share of it
// (the thresholds BenchmarkPlans measured).
func TestExactScan(t *testing.T) {
	for _, tc := range []struct {
		candidates, tenant, exactMax int
		want                         bool
	}{
		{338, 10_000, DefaultExactScanMax, true},
		{8_564, 10_000, DefaultExactScanMax, true}, // every share of a small tenant
		{4_000, 20_000, DefaultExactScanMax, true},
		{4_001, 20_000, DefaultExactScanMax, false},
		{21_431, 100_000, DefaultExactScanMax, false}, // over 20%
		{20_000, 100_000, DefaultExactScanMax, true},
		{26_286, 100_000, DefaultExactScanMax, false},
		{50_000, 1_000_000, DefaultExactScanMax, true}, // 5% past 100,000 cards
		{50_001, 1_000_000, DefaultExactScanMax, false},
		{10, 10_000, -1, false}, // never exact
		{10, 0, 10_000, false},  // tenant size unknown
		{90_000, 100_000, 1 << 40, true},
	} {
		x := &Index{exactMax: tc.exactMax}
		if got := x.exactScan(tc.candidates, tc.tenant); got != tc.want {
			t.Errorf("exactScan(%d of %d, max %d) = %v, want %v", tc.candidates, tc.tenant, tc.exactMax, got, tc.want)
		}
	}
}
