package retriever

import (
	"crypto/sha256"
	"encoding/hex"
)

// EmbeddingHash is the text hash stored with a card vector
// (cards.Embedding.TextHash): the first 16 bytes of the SHA-256 of the text,
// in hex. It is computed exactly as the retriever does when it decides
// whether a stored vector can be reused, so vectors written by another
// process (cardex reindex) with EmbeddingText and EmbeddingHash are reused
// by a running retriever.
func EmbeddingHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:16])
}
