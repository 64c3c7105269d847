package retriever

import (
	"sync"
	"sync/atomic"
)

// shareChunk is how many rows of a shared scan each participant claims at
// a time (a multiple of scanBlock): small enough that the two finish close
// together, large enough that claiming costs nothing.
const shareChunk = 8 * scanBlock

// rowShare lets a request's other goroutine take part in its quantised
// scan (Retriever.startLegs): the scan opens its pass to help, and help
// claims chunks of its rows until none are left. Each participant keeps
// its own lower bounds and rows (the τ it knows is at most the τ of all the
// rows, so it keeps every row the whole scan would); the scan merges them
// before its re-rank (merge), and the answer is the one a scan alone gives.
type rowShare struct {
	mu   sync.Mutex
	pass *sharedPass // open for help; nil before and after
}

// sharedPass is a quantised pass whose rows are claimed chunk by chunk.
type sharedPass struct {
	quantPass
	m     *MemoryVectors
	k, n  int            // the top k; the set's row count
	next  atomic.Int64   // the next chunk to claim
	wg    sync.WaitGroup // helpers scanning
	parts [][]*quantScratch
}

// run scans the chunks it claims into parts (one per query).
func (sp *sharedPass) run(parts []*quantScratch) {
	for {
		p0 := int(sp.next.Add(1)-1) * shareChunk
		if p0 >= sp.n {
			return
		}
		sp.scan(parts, p0, min(p0+shareChunk, sp.n))
	}
}

// scanShared is the pass over the set's n rows with whoever helps.
func (s *rowShare) scanShared(qp quantPass, m *MemoryVectors, k, n int) {
	sp := &sharedPass{quantPass: qp, m: m, k: k, n: n}
	s.mu.Lock()
	s.pass = sp
	s.mu.Unlock()
	sp.run(qp.scans)
	s.mu.Lock()
	s.pass = nil // no helper joins now
	s.mu.Unlock()
	sp.wg.Wait()
	for _, parts := range sp.parts { // written before the helpers' Done
		for x, sc := range qp.scans {
			sc.merge(parts[x])
			m.scratch.Put(parts[x])
		}
	}
}

// help scans chunks of the pass open for help, if there is one, until none
// are left.
func (s *rowShare) help() {
	s.mu.Lock()
	sp := s.pass
	if sp == nil {
		s.mu.Unlock()
		return
	}
	sp.wg.Add(1)
	s.mu.Unlock()
	defer sp.wg.Done()
	parts := make([]*quantScratch, len(sp.scans))
	for x := range parts {
		parts[x] = sp.m.getScratch()
		parts[x].lows.reset(sp.k)
		parts[x].keep = parts[x].keep[:0]
	}
	sp.run(parts)
	s.mu.Lock()
	sp.parts = append(sp.parts, parts)
	s.mu.Unlock()
}

// merge takes o's lower bounds and kept rows (another participant's, of the
// same query over other rows) into sc. The k largest bounds of all the rows
// are among the two's (each holds its own rows' k largest, and any bound it
// dropped is at most its τ), so the τ of the merged bounds is the whole
// scan's; and each kept every row of its own whose upper bound reaches that
// τ, since its own τ was never more. The re-rank drops the rest.
func (sc *quantScratch) merge(o *quantScratch) {
	sc.lows.vals = append(sc.lows.vals, o.lows.vals...)
	sc.lows.tau = min(sc.lows.tau, o.lows.tau)
	sc.keep = append(sc.keep, o.keep...)
}
