package synth

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
)

// Tenant is one tenant of a synthetic platform: its id and card count.
type Tenant struct {
	ID    string
	Cards int
}

// Platform returns the tenants of a platform hosting about total cards
// over n tenants, with skewed sizes as real platforms have (a log-normal
// spread: most tenants hold a few dozen to a few hundred tools, a few
// thousands, the largest up to maxPerTenant), ordered by id. The sizes sum
// to total exactly (when n ≤ total ≤ n·maxPerTenant) and are the same for
// the same arguments. Each tenant's cards are Catalogue(t.Cards,
// TenantSeed(i), t.ID).
func Platform(total, n, maxPerTenant int, seed int64) []Tenant {
	rng := rand.New(rand.NewSource(seed))
	weights := make([]float64, n)
	var sum float64
	for i := range weights {
		weights[i] = math.Exp(rng.NormFloat64() * 1.3)
		sum += weights[i]
	}
	out := make([]Tenant, n)
	left := total
	for i, w := range weights {
		c := min(max(int(w/sum*float64(total)), 1), maxPerTenant)
		out[i] = Tenant{ID: fmt.Sprintf("tenant-%05d", i), Cards: c}
		left -= c
	}
	// Spread what rounding and the cap left over (or took too much) one
	// card at a time over the tenants with room, largest weight first.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case weights[a] > weights[b]:
			return -1
		case weights[a] < weights[b]:
			return 1
		}
		return a - b
	})
	for left != 0 {
		moved := false
		for _, i := range order {
			switch {
			case left > 0 && out[i].Cards < maxPerTenant:
				out[i].Cards++
				left--
				moved = true
			case left < 0 && out[i].Cards > 1:
				out[i].Cards--
				left++
				moved = true
			}
			if left == 0 {
				break
			}
		}
		if !moved {
			break
		}
	}
	return out
}

// TenantSeed is the Catalogue seed of the i-th tenant of a Platform.
func TenantSeed(i int) int64 { return int64(1000 + i) }
