package retriever_test

import "testing"

// TestChanged: the channel taken before a change is closed by the Sync that
// applies it, and a Sync with nothing new leaves the next one open.
func TestChanged(t *testing.T) {
	st := newStore(t, card("files", "read_file", "Read a file."))
	r := newRetriever(t, st, nil)
	ch := r.Changed()
	syncView(t, r) // nothing new
	select {
	case <-ch:
		t.Fatal("closed by a Sync that changed nothing")
	default:
	}
	put(t, st, card("files", "stat", "Show a file's size."))
	syncView(t, r)
	select {
	case <-ch:
	default:
		t.Fatal("not closed by the Sync that applied a change")
	}
	select {
	case <-r.Changed():
		t.Fatal("the next channel is closed already")
	default:
	}
}
