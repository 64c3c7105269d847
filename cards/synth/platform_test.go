package synth_test

import (
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards/synth"
)

func TestPlatformSizes(t *testing.T) {
	for _, tt := range []struct{ total, n, max int }{{1_000_000, 5000, 10_000}, {10_000, 50, 1000}, {100, 100, 10}} {
		ts := synth.Platform(tt.total, tt.n, tt.max, 1)
		if len(ts) != tt.n {
			t.Fatalf("%d tenants, want %d", len(ts), tt.n)
		}
		sum, big := 0, 0
		for _, x := range ts {
			if x.Cards < 1 || x.Cards > tt.max {
				t.Fatalf("tenant %s has %d cards, want 1..%d", x.ID, x.Cards, tt.max)
			}
			sum += x.Cards
			if x.Cards >= tt.total/tt.n*4 {
				big++
			}
		}
		if sum != tt.total {
			t.Errorf("sizes sum to %d, want %d", sum, tt.total)
		}
		if tt.total >= 10*tt.n && big == 0 {
			t.Errorf("no tenant holds 4× the mean: the sizes are not skewed")
		}
		if !slices.Equal(ts, synth.Platform(tt.total, tt.n, tt.max, 1)) {
			t.Error("not deterministic")
		}
	}
}
