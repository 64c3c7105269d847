package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/embed"
)

// embedderFlags choose the embedder; serve and reindex share them, so both
// compute vectors of the same model id.
type embedderFlags struct {
	kind, url, model, cacheFile string
	dim, batch                  int
	timeout                     time.Duration
}

func (f *embedderFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.kind, "embedder", envOr("CARDEX_EMBEDDER", "builtin"),
		"builtin (hashed features + built-in word vectors; no model server), hashed (hashed features only), or openai (an OpenAI-compatible /v1/embeddings server: OpenAI, Ollama, vLLM, text-embeddings-inference) (env CARDEX_EMBEDDER)")
	fs.StringVar(&f.url, "embed-url", os.Getenv("CARDEX_EMBED_URL"),
		"openai: base URL of the embeddings server, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1 (env CARDEX_EMBED_URL); the API key is read from CARDEX_EMBED_API_KEY")
	fs.StringVar(&f.model, "embed-model", os.Getenv("CARDEX_EMBED_MODEL"),
		"openai: the model name, e.g. text-embedding-3-small or nomic-embed-text (env CARDEX_EMBED_MODEL)")
	fs.IntVar(&f.dim, "embed-dim", 0,
		fmt.Sprintf("vector dimension; hashed: 0 means %d; openai: 0 means detected from the server, then enforced", embed.DefaultDim))
	fs.IntVar(&f.batch, "embed-batch", embed.DefaultBatchSize, "openai: texts per embeddings request")
	fs.DurationVar(&f.timeout, "embed-timeout", embed.DefaultTimeout, "openai: timeout of one embeddings request (retried on timeouts, 429 and 5xx)")
	fs.StringVar(&f.cacheFile, "embed-cache-file", "", "openai: keep the vector cache in this file across restarts (JSON Lines)")
}

// build returns the chosen embedder. An openai embedder with no --embed-dim
// asks the server for one vector to learn its dimension, so that a bad URL,
// model or key fails here, before anything else starts.
func (f *embedderFlags) build(ctx context.Context, log *slog.Logger) (embed.Embedder, error) {
	switch f.kind {
	case "builtin", "":
		if f.url != "" || f.model != "" || f.dim != 0 {
			return nil, fmt.Errorf("--embed-url, --embed-model and --embed-dim are not for the builtin embedder")
		}
		return embed.Builtin()
	case "hashed":
		if f.url != "" || f.model != "" {
			return nil, fmt.Errorf("--embed-url and --embed-model are for --embedder openai (the embedder is %q)", f.kind)
		}
		if f.dim < 0 {
			return nil, fmt.Errorf("--embed-dim %d is negative", f.dim)
		}
		return embed.NewHashed(f.dim), nil
	case "openai":
		if f.url == "" || f.model == "" {
			return nil, fmt.Errorf("--embedder openai needs --embed-url and --embed-model (or CARDEX_EMBED_URL and CARDEX_EMBED_MODEL)")
		}
		key := os.Getenv("CARDEX_EMBED_API_KEY")
		o, err := embed.NewOpenAI(embed.OpenAIConfig{
			BaseURL:   f.url,
			Model:     f.model,
			APIKey:    key,
			Dim:       f.dim,
			BatchSize: f.batch,
			Timeout:   f.timeout,
			CacheFile: f.cacheFile,
			Logger:    log,
		})
		if err != nil {
			return nil, err
		}
		if _, err := o.DetectDim(ctx); err != nil {
			o.Close()
			return nil, err
		}
		log.Info("embedder", "model", o.Model(), "dim", o.Dim(), "endpoint", o.Endpoint(), "api_key", key != "")
		return o, nil
	default:
		return nil, fmt.Errorf("--embedder %q: want builtin, hashed or openai", f.kind)
	}
}
