// Package embed turns texts into unit vectors.
package embed

import "context"

// Embedder has one job: texts in, unit vectors out, with a stable model id
// and dimension. Vectors of two models are never compared.
type Embedder interface {
	// Model is a stable identifier that changes whenever vectors would.
	Model() string
	// Dim is the length of every vector.
	Dim() int
	// Embed returns one unit-length vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
