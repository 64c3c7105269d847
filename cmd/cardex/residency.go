package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
	"github.com/seed0cff8200/cardex/retriever"
)

// residencyFlags make a replica hold a subset of the tenants
// (retriever.Residency; docs/SCALING.md).
type residencyFlags struct {
	tenants, shard, budget string
}

func (f *residencyFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.tenants, "tenants", os.Getenv("CARDEX_TENANTS"),
		"hold only these tenants (comma-separated) from the start, and others on demand (env CARDEX_TENANTS)")
	fl.StringVar(&f.shard, "shard", os.Getenv("CARDEX_SHARD"),
		"hold the tenants of shard I of N (I/N, a hash of the tenant id) from the start, and others on demand (env CARDEX_SHARD)")
	fl.StringVar(&f.budget, "memory-budget", os.Getenv("CARDEX_MEMORY_BUDGET"),
		"hold tenants on demand (loaded at their first request) and drop the least recently used past this estimated size, such as 2GiB (env CARDEX_MEMORY_BUDGET)")
}

// option is the retriever option the flags ask for; ok is false when they
// ask for none (every tenant is held).
func (f *residencyFlags) option(met *metrics.Metrics) (opt retriever.Option, ok bool, err error) {
	if f.tenants == "" && f.shard == "" && f.budget == "" {
		return nil, false, nil
	}
	var rs retriever.Residency
	switch {
	case f.tenants != "" && f.shard != "":
		return nil, false, usageError("--tenants and --shard: give one of them")
	case f.tenants != "":
		set := map[string]bool{}
		for _, t := range strings.Split(f.tenants, ",") {
			t = strings.TrimSpace(t)
			if !cards.ValidName(t) {
				return nil, false, usageError("--tenants: %q is not a tenant id", t)
			}
			set[t] = true
		}
		rs.Assigned = func(t string) bool { return set[t] }
	case f.shard != "":
		i, n, err := parseShard(f.shard)
		if err != nil {
			return nil, false, err
		}
		rs.Assigned = retriever.Shard(i, n)
	}
	if f.budget != "" {
		if rs.Budget, err = parseBytes(f.budget); err != nil {
			return nil, false, usageError("--memory-budget %q: %v", f.budget, err)
		}
	}
	rs.OnLoad = met.TenantLoads()
	return retriever.WithResidency(rs), true, nil
}

// parseShard reads I/N with 0 ≤ I < N ≤ 1024.
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || n > 1024 || i < 0 || i >= n {
		return 0, 0, usageError("--shard %q: want I/N with 0 ≤ I < N ≤ 1024, such as 0/3", s)
	}
	return i, n, nil
}

// parseBytes reads a size: a number of bytes, or one with a unit (KiB, MiB,
// GiB, TiB; KB, MB, GB, TB are decimal).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}, {"", 1}}
	for _, u := range units {
		num, ok := strings.CutSuffix(strings.TrimSpace(s), u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || v < 1 || v*u.mult > 1<<50 {
			return 0, fmt.Errorf("want a size such as 512MiB or 2GiB, from 1 byte to 1 PiB")
		}
		return int64(v * u.mult), nil
	}
	return 0, fmt.Errorf("want a size such as 512MiB or 2GiB")
}
