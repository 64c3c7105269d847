package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

func reindexCmd() *cobra.Command {
	var (
		dataDir, logLevel string
		missingOnly       bool
		ef                embedderFlags
	)
	cmd := &cobra.Command{
		Use:   "reindex",
		Short: "Re-embed every card of the embedded store with the chosen embedder (stop the server first)",
		Long: `Re-embed every card of the embedded store with the chosen embedder and store
the vectors under its model id, so that "cardex serve" with the same embedder
flags starts without embedding anything. Vectors of other models are kept but
never compared with these. Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(logLevel)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := os.Stat(filepath.Join(dataDir, embedded.FileName)); err != nil {
				return fmt.Errorf("no embedded store in %s: %w", dataDir, err)
			}
			emb, err := ef.build(ctx, log)
			if err != nil {
				return err
			}
			if c, ok := emb.(io.Closer); ok {
				defer c.Close()
			}
			store, err := embedded.Open(dataDir)
			if errors.Is(err, embedded.ErrLocked) {
				return fmt.Errorf("%w; stop the cardex serve that uses it, then run reindex again", err)
			}
			if err != nil {
				return err
			}
			defer store.Close()
			p := newProgress(cmd.ErrOrStderr(), "reindex")
			res, err := reindex(ctx, store, emb, missingOnly, p.update)
			if err != nil {
				return err
			}
			took := time.Since(p.start)
			fmt.Fprintf(cmd.OutOrStdout(), "%d cards embedded with %s (dim %d), %d already up to date, in %s (%.1f cards/s)\n",
				res.embedded, emb.Model(), emb.Dim(), res.upToDate, took.Round(time.Millisecond), rate(res.embedded, took))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", envOr("CARDEX_DATA_DIR", "./cardex-data"), "embedded store directory (env CARDEX_DATA_DIR)")
	f.BoolVar(&missingOnly, "missing-only", false, "skip cards whose stored vector for this model matches their current text")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	ef.register(cmd)
	return cmd
}

// reindexBatch is how many cards are read, embedded and written together.
const reindexBatch = 128

type reindexResult struct{ embedded, upToDate int }

// reindex embeds every card of the store (any status, so that activating a
// card needs no embedding) with emb and stores the vectors with the text
// hash the retriever checks, so they are reused. With missingOnly, cards
// whose stored vector already matches are skipped. progress is called with
// the cards done so far and the total.
func reindex(ctx context.Context, st cards.Store, emb embed.Embedder, missingOnly bool, progress func(done, total int)) (reindexResult, error) {
	var res reindexResult
	// Every live card's key, from the change sequence (it keeps the latest
	// change per key, across tenants).
	var keys []cards.Key
	for since := uint64(0); ; {
		chs, err := st.Changes(ctx, since, 1000)
		if err != nil {
			return res, fmt.Errorf("read changes: %w", err)
		}
		if len(chs) == 0 {
			break
		}
		for _, ch := range chs {
			if !ch.Deleted && !ch.Key.IsServer() {
				keys = append(keys, ch.Key)
			}
		}
		since = chs[len(chs)-1].Seq
	}
	model, dim := emb.Model(), emb.Dim()
	progress(0, len(keys))
	for start := 0; start < len(keys); start += reindexBatch {
		part := keys[start:min(start+reindexBatch, len(keys))]
		var stored map[cards.Key]cards.Embedding
		if missingOnly {
			var err error
			if stored, err = st.Embeddings(ctx, model, part); err != nil {
				return res, fmt.Errorf("read embeddings: %w", err)
			}
		}
		// The retriever embeds a card with its learned phrasings.
		learned, err := st.Learned(ctx, part)
		if err != nil {
			return res, fmt.Errorf("read learned phrasings: %w", err)
		}
		var todo []cards.Embedding
		var texts []string
		for _, k := range part {
			c, err := st.Get(ctx, k)
			if errors.Is(err, cards.ErrNotFound) {
				continue
			}
			if err != nil {
				return res, fmt.Errorf("read card %s: %w", k, err)
			}
			text := retriever.LearnedEmbeddingText(&c, learned[k])
			hash := retriever.EmbeddingHash(text)
			if s, ok := stored[k]; ok && s.TextHash == hash && len(s.Vector) == dim {
				res.upToDate++
				continue
			}
			todo = append(todo, cards.Embedding{Key: k, Model: model, TextHash: hash})
			texts = append(texts, text)
		}
		if len(texts) > 0 {
			vs, err := emb.Embed(ctx, texts)
			if err != nil {
				return res, fmt.Errorf("embed cards with %s: %w", model, err)
			}
			if len(vs) != len(texts) {
				return res, fmt.Errorf("embed cards with %s: %d vectors for %d texts", model, len(vs), len(texts))
			}
			for i := range todo {
				if len(vs[i]) != dim {
					return res, fmt.Errorf("embed cards with %s: a %d-dimensional vector, want %d", model, len(vs[i]), dim)
				}
				todo[i].Vector = vs[i]
			}
			if err := st.PutEmbeddings(ctx, todo); err != nil {
				return res, fmt.Errorf("store embeddings: %w", err)
			}
			res.embedded += len(todo)
		}
		progress(start+len(part), len(keys))
	}
	return res, nil
}

// progress prints "LABEL: n/total cards (p%), r cards/s, ETA" on stderr:
// rewritten in place on a terminal (at most 5 times a second), one line
// every 2 seconds otherwise, and always at the end.
type progress struct {
	w     io.Writer
	label string
	tty   bool
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, label string) *progress {
	p := &progress{w: w, label: label, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(done, total int) {
	now := time.Now()
	final := done >= total
	every := 2 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	if !final && now.Sub(p.last) < every {
		return
	}
	p.last = now
	elapsed := now.Sub(p.start)
	r := rate(done, elapsed)
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	line := fmt.Sprintf("%s: %d/%d cards (%.0f%%), %.1f cards/s", p.label, done, total, pct, r)
	if !final && r > 0 {
		line += fmt.Sprintf(", about %s left", time.Duration(float64(total-done)/r*float64(time.Second)).Round(time.Second))
	}
	if p.tty {
		const width = 24
		fill := width
		if total > 0 {
			fill = width * done / total
		}
		fmt.Fprintf(p.w, "\r[%s%s] %s\x1b[K", strings.Repeat("#", fill), strings.Repeat(".", width-fill), line)
		if final {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
