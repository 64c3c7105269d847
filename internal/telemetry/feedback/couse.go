package feedback

import (
	"context"
	"slices"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// Co-usage: the tools an orchestrator reported used (ReportOutcome
// used_tool) in one session — or, for discoveries without a session id, in
// one turn (the outcomes of one discovery) — are, in the order first
// reported, one observation of tools used together (cards.CoUse). A session
// is recorded once no tool was reported used in it for SessionIdle, or
// when the recorder closes; at most MaxOpenSessions are held, the longest
// idle recorded first beyond that. What is recorded is counts per tool of
// the tenant: no subject, no session id, no query.
const (
	SessionIdle     = 15 * time.Minute
	MaxOpenSessions = 10000
)

// CoUser records co-usage (the retriever, which writes it to the store
// that every replica follows).
type CoUser interface {
	RecordCoUse(ctx context.Context, uses []cards.CoUse) (bool, error)
}

// usageKey names the group of uses an outcome belongs to: the caller's
// session when it has one, the discovery (its turn) otherwise. subject
// is the subject or, replaying a log, its hash: either way one caller.
func usageKey(tenant, subject, session, discovery string) string {
	if session != "" {
		return "s\x00" + sessionKey(tenant, subject, session)
	}
	return "d\x00" + tenant + "\x00" + discovery
}

type openSession struct {
	tools []cards.Key
	last  time.Time
}

// sessions groups reported uses into co-usage observations. Not safe for
// concurrent use (the recorder holds its lock).
type sessions struct {
	open map[string]*openSession
}

// add notes that tool was used in the group key at t.
func (s *sessions) add(key string, tool cards.Key, t time.Time) {
	if s.open == nil {
		s.open = map[string]*openSession{}
	}
	o := s.open[key]
	if o == nil {
		o = &openSession{}
		s.open[key] = o
	}
	if !slices.Contains(o.tools, tool) && len(o.tools) < cards.MaxSessionTools {
		o.tools = append(o.tools, tool)
	}
	o.last = t
}

// due removes and returns the observations of the sessions idle for
// SessionIdle at now (all of them when all is set), and of the longest
// idle beyond MaxOpenSessions, oldest first; sessions of one tool are
// dropped, as they teach no co-usage.
func (s *sessions) due(now time.Time, all bool) []cards.CoUse {
	var keys, rest []string
	for k, o := range s.open {
		if all || now.Sub(o.last) >= SessionIdle {
			keys = append(keys, k)
		} else {
			rest = append(rest, k)
		}
	}
	byLast := func(a, b string) int { return s.open[a].last.Compare(s.open[b].last) }
	if over := len(rest) - MaxOpenSessions; over > 0 {
		slices.SortFunc(rest, byLast)
		keys = append(keys, rest[:over]...)
	}
	slices.SortFunc(keys, byLast)
	var out []cards.CoUse
	for _, k := range keys {
		o := s.open[k]
		delete(s.open, k)
		if len(o.tools) >= 2 {
			out = append(out, cards.CoUse{Tools: o.tools, At: o.last})
		}
	}
	return out
}

// CoUsesFromEvents replays a feedback log's outcomes into the co-usage
// observations the service records from them, in the order of the log:
// tools used in one session (or one discovery's turn) of one caller, a
// session ending after SessionIdle without a use.
func CoUsesFromEvents(events []Event) []cards.CoUse {
	var s sessions
	var out []cards.CoUse
	for _, e := range events {
		if e.Type != TypeOutcome || e.Tool == nil {
			continue
		}
		out = append(out, s.due(e.Time, false)...)
		k := cards.Key{Tenant: e.Tenant, Server: e.Tool.Server, Name: e.Tool.Name}
		s.add(usageKey(e.Tenant, e.SubjectHash, e.SessionID, e.DiscoveryID), k, e.Time)
	}
	return append(out, s.due(time.Time{}, true)...)
}

// FlushCoUse records the co-usage of the sessions that are due (all of
// them when all is set) through Config.CoUse, in batches of
// cards.MaxCoUses; it returns how many sessions it recorded. The recorder
// calls it every SessionIdle/5 and when it closes.
func (r *Recorder) FlushCoUse(ctx context.Context, all bool) (int, error) {
	if r.cfg.CoUse == nil {
		return 0, nil
	}
	r.mu.Lock()
	uses := append(r.dueUses, r.usage.due(r.cfg.Now(), all)...)
	r.dueUses = nil
	r.mu.Unlock()
	n := 0
	for len(uses) > 0 {
		batch := uses[:min(len(uses), cards.MaxCoUses)]
		uses = uses[len(batch):]
		if _, err := r.cfg.CoUse.RecordCoUse(ctx, batch); err != nil {
			return n, err
		}
		n += len(batch)
	}
	return n, nil
}

// noteUse adds a reported use to its session; past MaxOpenSessions, the
// longest idle sessions are set aside for the next flush (at most
// MaxOpenSessions of them: beyond that the oldest are dropped). Call with
// r.mu held.
func (r *Recorder) noteUse(key string, tool cards.Key) {
	if r.cfg.CoUse == nil {
		return
	}
	r.usage.add(key, tool, r.cfg.Now())
	if len(r.usage.open) > MaxOpenSessions {
		r.dueUses = append(r.dueUses, r.usage.due(r.cfg.Now(), false)...)
		if over := len(r.dueUses) - MaxOpenSessions; over > 0 {
			r.dueUses = slices.Delete(r.dueUses, 0, over)
		}
	}
}

// flushLoop flushes due sessions until ctx ends.
func (r *Recorder) flushLoop(ctx context.Context) {
	defer close(r.flushed)
	t := time.NewTicker(SessionIdle / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.FlushCoUse(ctx, false); err != nil {
				r.log.Warn("co-usage: recording failed; those sessions are lost (their outcomes are in the feedback log)", "err", err)
			}
		}
	}
}
