package cards

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Co-usage bounds: per card, the MaxCompanions strongest companions are
// kept; counts halve every CompanionHalfLife, and a companion whose count
// decays under MinCompanionCount is forgotten. One AddCompanions call
// records at most MaxCoUses sessions of at most MaxSessionTools tools.
const (
	MaxCompanions     = 16
	MaxCoUses         = 100
	MaxSessionTools   = 32
	CompanionHalfLife = 30 * 24 * time.Hour
	MinCompanionCount = 0.05
)

// Companion is a tool of the same tenant used in the same session (or turn)
// as a card, with how often — decayed counts, nothing else: no subject, no
// query, no time of a single use.
type Companion struct {
	Server string `json:"server"`
	Name   string `json:"name"`
	// Before and After count the sessions in which the companion was used
	// before the card, and after it.
	Before float64 `json:"before,omitempty"`
	After  float64 `json:"after,omitempty"`
}

// Count is how often the companion was used with the card, either side.
func (c Companion) Count() float64 { return c.Before + c.After }

// Companions is a card's co-usage table: how many sessions used it with
// other tools (Uses), and its companions, strongest first (then by server
// and name), with counts as of At.
type Companions struct {
	At    time.Time   `json:"at"`
	Uses  float64     `json:"uses"`
	Tools []Companion `json:"tools"`
}

// Decayed returns the table with its counts as of t (t before At changes
// nothing): every count halves per CompanionHalfLife, and companions under
// MinCompanionCount are dropped.
func (cs Companions) Decayed(t time.Time) Companions {
	out := Companions{At: cs.At, Uses: cs.Uses, Tools: slices.Clone(cs.Tools)}
	if !t.After(cs.At) {
		return out
	}
	f := decay(t.Sub(cs.At))
	out.Uses *= f
	for i := range out.Tools {
		out.Tools[i].Before *= f
		out.Tools[i].After *= f
	}
	out.At = t
	out.Tools = slices.DeleteFunc(out.Tools, func(c Companion) bool { return c.Count() < MinCompanionCount })
	return out
}

func decay(d time.Duration) float64 {
	return math.Exp2(-float64(d) / float64(CompanionHalfLife))
}

// CoUse is one observation of co-usage: the tools of one tenant that one
// session (or turn) used, in the order each was first used, at At (zero:
// when it is recorded).
type CoUse struct {
	Tools []Key
	At    time.Time
}

// ValidateCoUses checks a batch of observations: at most MaxCoUses, each
// of 2 to MaxSessionTools different tools of one tenant.
func ValidateCoUses(us []CoUse) error {
	if len(us) > MaxCoUses {
		return Invalid("co_uses", "has %d entries; the limit is %d", len(us), MaxCoUses)
	}
	for i, u := range us {
		field := fmt.Sprintf("co_uses[%d].tools", i)
		if n := len(u.Tools); n < 2 || n > MaxSessionTools {
			return Invalid(field, "has %d entries; a session names 2 to %d tools", n, MaxSessionTools)
		}
		seen := make(map[Key]bool, len(u.Tools))
		for j, k := range u.Tools {
			switch {
			case k.Tenant != u.Tools[0].Tenant:
				return Invalid(field, "names two tenants (%q, %q); co-usage is kept per tenant", u.Tools[0].Tenant, k.Tenant)
			case k.IsServer():
				return Invalid(fmt.Sprintf("%s[%d]", field, j), "names a server, not a tool")
			case seen[k]:
				return Invalid(field, "names %s twice; a session lists each tool once, at its first use", k)
			}
			seen[k] = true
		}
	}
	return nil
}

// AddCompanions is the one rule for co-usage, applied by every store to the
// table of card k: each session that used k counts once in Uses, and each
// other tool it used once, as used before k or after it; a session older
// than the table counts decayed to the table's time, a later one first
// decays the table to its own. Then companions under MinCompanionCount are
// dropped and the MaxCompanions strongest kept. It returns the new table
// (have is not modified) and whether any session used k. now stands in for
// a session's zero At.
func AddCompanions(have Companions, k Key, now time.Time, uses ...CoUse) (Companions, bool) {
	out := Companions{At: have.At, Uses: have.Uses, Tools: slices.Clone(have.Tools)}
	changed := false
	for _, u := range uses {
		at := slices.Index(u.Tools, k)
		if at < 0 {
			continue
		}
		when := u.At
		if when.IsZero() {
			when = now
		}
		w := 1.0
		if out.At.IsZero() || when.After(out.At) {
			out = out.Decayed(when)
			out.At = when
		} else {
			w = decay(out.At.Sub(when))
		}
		out.Uses += w
		for j, other := range u.Tools {
			if j == at {
				continue
			}
			i := slices.IndexFunc(out.Tools, func(c Companion) bool { return c.Server == other.Server && c.Name == other.Name })
			if i < 0 {
				out.Tools = append(out.Tools, Companion{Server: other.Server, Name: other.Name})
				i = len(out.Tools) - 1
			}
			if j < at {
				out.Tools[i].Before += w
			} else {
				out.Tools[i].After += w
			}
		}
		changed = true
	}
	if !changed {
		return out, false
	}
	out.Tools = slices.DeleteFunc(out.Tools, func(c Companion) bool { return c.Count() < MinCompanionCount })
	slices.SortFunc(out.Tools, func(a, b Companion) int {
		return cmp.Or(cmp.Compare(b.Count(), a.Count()), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Name, b.Name))
	})
	if len(out.Tools) > MaxCompanions {
		out.Tools = out.Tools[:MaxCompanions]
	}
	return out, true
}

// KeepCoUses returns the sessions with the tools for which exists is false
// left out, and sessions left with fewer than two tools dropped (the
// stores' rule for cards that do not exist).
func KeepCoUses(us []CoUse, exists func(Key) bool) []CoUse {
	var out []CoUse
	for _, u := range us {
		kept := slices.DeleteFunc(slices.Clone(u.Tools), func(k Key) bool { return !exists(k) })
		if len(kept) >= 2 {
			out = append(out, CoUse{Tools: kept, At: u.At})
		}
	}
	return out
}

// CoUseKeys lists the cards a batch of observations names, each once, in
// first-seen order: the tables AddCompanions changes.
func CoUseKeys(us []CoUse) []Key {
	var out []Key
	seen := map[Key]bool{}
	for _, u := range us {
		for _, k := range u.Tools {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}
