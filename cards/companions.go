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
// records at most MaxCoUses observations.
const (
	MaxCompanions     = 16
	MaxCoUses         = 1000
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

// Companions is a card's co-usage table: its companions, strongest first
// (then by server and name), with counts as of At.
type Companions struct {
	At    time.Time   `json:"at"`
	Tools []Companion `json:"tools"`
}

// Decayed returns the table with its counts as of t (t before At changes
// nothing): every count halves per CompanionHalfLife, and companions under
// MinCompanionCount are dropped.
func (cs Companions) Decayed(t time.Time) Companions {
	out := Companions{At: cs.At, Tools: slices.Clone(cs.Tools)}
	if !t.After(cs.At) {
		return out
	}
	f := decay(t.Sub(cs.At))
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

// CoUse is one observation of co-usage: Then was used after First, in one
// session or turn of one tenant, at At (zero: when it is recorded).
type CoUse struct {
	First, Then Key
	At          time.Time
}

// ValidateCoUses checks a batch of observations: at most MaxCoUses, each of
// two different cards of one tenant.
func ValidateCoUses(us []CoUse) error {
	if len(us) > MaxCoUses {
		return Invalid("co_uses", "has %d entries; the limit is %d", len(us), MaxCoUses)
	}
	for i, u := range us {
		switch {
		case u.First.Tenant != u.Then.Tenant:
			return Invalid(fmt.Sprintf("co_uses[%d]", i), "names two tenants (%q, %q); co-usage is kept per tenant", u.First.Tenant, u.Then.Tenant)
		case u.First == u.Then:
			return Invalid(fmt.Sprintf("co_uses[%d]", i), "names %s twice; a tool is not its own companion", u.First)
		case u.First.IsServer() || u.Then.IsServer():
			return Invalid(fmt.Sprintf("co_uses[%d]", i), "names a server, not a tool")
		}
	}
	return nil
}

// AddCompanions is the one rule for co-usage, applied by every store to the
// table of card k: each observation that names k counts its other tool once,
// as used after k (k was First) or before it (k was Then), decayed to the
// table's time (a later observation first decays the table to its own time).
// Then companions under MinCompanionCount are dropped and the
// MaxCompanions strongest kept. It returns the new table (have is not
// modified) and whether any observation named k. now stands in for an
// observation's zero At.
func AddCompanions(have Companions, k Key, now time.Time, uses ...CoUse) (Companions, bool) {
	out := Companions{At: have.At, Tools: slices.Clone(have.Tools)}
	changed := false
	for _, u := range uses {
		var other Key
		after := false
		switch k {
		case u.First:
			other, after = u.Then, true
		case u.Then:
			other = u.First
		default:
			continue
		}
		at := u.At
		if at.IsZero() {
			at = now
		}
		w := 1.0
		if out.At.IsZero() || at.After(out.At) {
			out = out.Decayed(at)
			out.At = at
		} else {
			w = decay(out.At.Sub(at))
		}
		i := slices.IndexFunc(out.Tools, func(c Companion) bool { return c.Server == other.Server && c.Name == other.Name })
		if i < 0 {
			out.Tools = append(out.Tools, Companion{Server: other.Server, Name: other.Name})
			i = len(out.Tools) - 1
		}
		if after {
			out.Tools[i].After += w
		} else {
			out.Tools[i].Before += w
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

// CoUseKeys lists the cards a batch of observations names, each once, in
// first-seen order: the tables AddCompanions changes.
func CoUseKeys(us []CoUse) []Key {
	var out []Key
	seen := map[Key]bool{}
	for _, u := range us {
		for _, k := range []Key{u.First, u.Then} {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}
