package embed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/seed0cff8200/cardex/embed/apiclient"
)

// One /v1/embeddings request of an OpenAI embedder: the wire format, and
// the reading of the vectors it answers (apiclient does the retries).

type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

// APIError is a non-success HTTP answer of the embeddings server.
type APIError = apiclient.APIError

// fetch embeds one batch of non-empty texts, retrying transient failures.
func (o *OpenAI) fetch(ctx context.Context, batch []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: o.cfg.Model, Input: batch})
	if err != nil {
		return nil, err
	}
	var vs [][]float32
	err = o.api.Post(ctx, body, "application/json", func(r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		vs, err = o.decode(data, len(batch))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("embed with %s: %w", o.model, err)
	}
	return vs, nil
}

// decode checks and normalises a successful answer for n inputs.
func (o *OpenAI) decode(data []byte, n int) ([][]float32, error) {
	var resp embeddingsResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("embedding server %s: the answer is not an embeddings response: %w", o.api.Display(), err)
	}
	if len(resp.Data) != n {
		return nil, fmt.Errorf("embedding server %s: got %d embeddings for %d inputs", o.api.Display(), len(resp.Data), n)
	}
	out := make([][]float32, n)
	for pos, d := range resp.Data {
		i := pos
		if d.Index != nil {
			i = *d.Index
		}
		if i < 0 || i >= n {
			return nil, fmt.Errorf("embedding server %s: index %d is outside 0..%d", o.api.Display(), i, n-1)
		}
		if out[i] != nil {
			return nil, fmt.Errorf("embedding server %s: index %d appears twice", o.api.Display(), i)
		}
		raw, err := parseVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("embedding server %s: embedding %d: %w", o.api.Display(), i, err)
		}
		if err := o.checkDim(len(raw)); err != nil {
			return nil, err
		}
		v, err := normalize(raw)
		if err != nil {
			return nil, fmt.Errorf("embedding server %s: embedding %d: %w", o.api.Display(), i, err)
		}
		out[i] = v
	}
	return out, nil
}

// checkDim records the first dimension seen (when none was configured) and
// rejects every other.
func (o *OpenAI) checkDim(d int) error {
	if d == 0 {
		return fmt.Errorf("embedding server %s returned an empty vector", o.api.Display())
	}
	if o.dim.CompareAndSwap(0, int64(d)) {
		return nil
	}
	if want := o.Dim(); d != want {
		return fmt.Errorf("%w: %s returned a %d-dimensional vector for model %q, want %d",
			ErrDimensionMismatch, o.api.Display(), d, o.cfg.Model, want)
	}
	return nil
}

// parseVector reads an embedding given as a JSON array of numbers or as a
// base64 string of little-endian float32s (encoding_format "base64").
func parseVector(raw json.RawMessage) ([]float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errors.New("not a base64 float32 vector")
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v, nil
	}
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("not a vector of numbers: %w", err)
	}
	return v, nil
}

// normalize returns v / ‖v‖ as float32; the zero vector stays zero.
func normalize(v []float64) ([]float32, error) {
	var ss float64
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("the vector has a non-finite value")
		}
		ss += x * x
	}
	out := make([]float32, len(v))
	if ss == 0 {
		return out, nil
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out, nil
}
