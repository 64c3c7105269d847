package feedback

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Hot tools: per tenant and per caller (the subject's hash, as the log keys
// it), the tools reported used most (ReportOutcome used_tool), counted with
// a decay of HotHalfLife. The most used become candidate pins (always_load):
// suggested in the console and by `cardex cards lint`, and loaded
// automatically only when the operator turns it on (`cardex serve
// --auto-pin-hot N`). Counts only; every tally is bounded.
const (
	HotHalfLife = 14 * 24 * time.Hour
	// MaxHotTools is how many tools one tally keeps (the weakest go).
	MaxHotTools = 64
	// MaxHotCallers is how many callers' tallies are kept (the least
	// recently used go).
	MaxHotCallers = 10000
	// A candidate pin was used at least MinPinUses times (decayed) and in
	// at least MinPinShare of its tally's uses.
	MinPinUses  = 3
	MinPinShare = 0.1
	// MaxPins is the most pins suggested or loaded (DiscoverTools'
	// always_load limit).
	MaxPins = 5
)

// HotTool is a tool with its decayed use count and its share of its
// tally's uses.
type HotTool struct {
	Tool
	Uses  float64 `json:"uses"`
	Share float64 `json:"share"`
}

type tally struct {
	at    time.Time // counts are as of at
	total float64
	uses  map[Tool]float64
}

func (t *tally) decayTo(now time.Time) {
	if !now.After(t.at) {
		return
	}
	f := math.Exp2(-float64(now.Sub(t.at)) / float64(HotHalfLife))
	t.total *= f
	for k := range t.uses {
		t.uses[k] *= f
	}
	t.at = now
}

func (t *tally) add(tool Tool, at time.Time) {
	if t.uses == nil {
		t.uses = map[Tool]float64{}
	}
	w := 1.0
	if at.After(t.at) {
		t.decayTo(at)
	} else {
		w = math.Exp2(-float64(t.at.Sub(at)) / float64(HotHalfLife))
	}
	t.total += w
	t.uses[tool] += w
	if len(t.uses) > MaxHotTools {
		// The weakest other tool goes, so that a newly used one can
		// enter a full tally.
		var weakest Tool
		first := true
		for k, v := range t.uses {
			if k != tool && (first || v < t.uses[weakest] || (v == t.uses[weakest] && lessTool(k, weakest))) {
				weakest, first = k, false
			}
		}
		delete(t.uses, weakest)
	}
}

func lessTool(a, b Tool) bool {
	return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Name, b.Name)) < 0
}

// top lists the tally's tools as of now, most used first.
func (t *tally) top(now time.Time) []HotTool {
	if t == nil {
		return nil
	}
	f := 1.0
	if now.After(t.at) {
		f = math.Exp2(-float64(now.Sub(t.at)) / float64(HotHalfLife))
	}
	out := make([]HotTool, 0, len(t.uses))
	for k, v := range t.uses {
		out = append(out, HotTool{Tool: k, Uses: v * f, Share: v / t.total})
	}
	slices.SortFunc(out, func(a, b HotTool) int {
		if c := cmp.Compare(b.Uses, a.Uses); c != 0 {
			return c
		}
		if lessTool(a.Tool, b.Tool) {
			return -1
		}
		return 1
	})
	return out
}

// Hot keeps the tallies. It is safe for concurrent use.
type Hot struct {
	mu      sync.Mutex
	tenants map[string]*tally
	callers map[string]*tally // tenant \x00 subject hash
	seen    map[string]time.Time
}

// NewHot returns empty tallies.
func NewHot() *Hot {
	return &Hot{tenants: map[string]*tally{}, callers: map[string]*tally{}, seen: map[string]time.Time{}}
}

func callerKey(tenant, subjectHash string) string { return tenant + "\x00" + subjectHash }

// Add counts one use of tool by a caller of tenant at t.
func (h *Hot) Add(tenant, subjectHash string, tool Tool, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tenants[tenant] == nil {
		h.tenants[tenant] = &tally{}
	}
	h.tenants[tenant].add(tool, t)
	if subjectHash == "" {
		return
	}
	k := callerKey(tenant, subjectHash)
	if h.callers[k] == nil {
		if len(h.callers) >= MaxHotCallers {
			var oldest string
			for c, at := range h.seen {
				if oldest == "" || at.Before(h.seen[oldest]) {
					oldest = c
				}
			}
			delete(h.callers, oldest)
			delete(h.seen, oldest)
		}
		h.callers[k] = &tally{}
	}
	h.callers[k].add(tool, t)
	h.seen[k] = t
}

// Tenant lists a tenant's tools, most used first, as of now.
func (h *Hot) Tenant(tenant string, now time.Time) []HotTool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tenants[tenant].top(now)
}

// Caller lists one caller's tools, most used first, as of now.
func (h *Hot) Caller(tenant, subjectHash string, now time.Time) []HotTool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.callers[callerKey(tenant, subjectHash)].top(now)
}

// Callers lists the subject hashes of a tenant's callers with a tally.
func (h *Hot) Callers(tenant string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for k := range h.callers {
		if t, s, _ := strings.Cut(k, "\x00"); t == tenant {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// IsCandidate says whether a tool qualifies as a pin: MinPinUses (with a
// little slack: uses decay from the moment they are counted) and
// MinPinShare.
func IsCandidate(t HotTool) bool { return t.Uses >= MinPinUses-0.01 && t.Share >= MinPinShare }

// Candidates are the tools of a list that qualify as pins, at most n.
func Candidates(tools []HotTool, n int) []HotTool {
	var out []HotTool
	for _, t := range tools {
		if len(out) == n {
			break
		}
		if IsCandidate(t) {
			out = append(out, t)
		}
	}
	return out
}

// Pins are a caller's pins, at most n (and MaxPins): its own candidates
// first, then its tenant's.
func (h *Hot) Pins(tenant, subjectHash string, now time.Time, n int) []Tool {
	n = min(n, MaxPins)
	var out []Tool
	for _, list := range [][]HotTool{h.Caller(tenant, subjectHash, now), h.Tenant(tenant, now)} {
		for _, t := range Candidates(list, n) {
			if len(out) < n && !slices.Contains(out, t.Tool) {
				out = append(out, t.Tool)
			}
		}
	}
	return out
}

// HotFromEvents counts a feedback log's used tools (its outcomes).
func HotFromEvents(events []Event) *Hot {
	h := NewHot()
	for _, e := range events {
		if e.Type == TypeOutcome && e.Tool != nil {
			h.Add(e.Tenant, e.SubjectHash, *e.Tool, e.Time)
		}
	}
	return h
}
