package cards

import (
	"strings"
	"testing"
)

// BenchmarkSchemaLimits measures the dearest schemas and documents the
// limits still accept: what one card can cost at registration (compile)
// and one AuthorizeCall (validate).
//
//	go test -run '^$' -bench SchemaLimits -benchtime 5x ./cards/
func BenchmarkSchemaLimits(b *testing.B) {
	flat := `{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{},`, MaxSchemaObjects-1), ",") + `]}`
	bomb := refBomb(14) // about 98,000 evaluations, under MaxSchemaEvaluations
	compile := map[string]string{
		"compile/64 levels of not":         nested("not", 63),
		"compile/2048 objects":             flat,
		"compile/ref fan-out of 14 levels": bomb,
	}
	for _, name := range []string{"compile/64 levels of not", "compile/2048 objects", "compile/ref fan-out of 14 levels"} {
		raw := []byte(compile[name])
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := CompileSchema(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	s, err := CompileSchema([]byte(bomb))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("validate/ref fan-out of 14 levels", func(b *testing.B) {
		for b.Loop() {
			if err := s.Validate([]byte(`{}`)); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A document at the work limit: 999 values, each dear (1,001
	// evaluations: an anyOf of 1,000 consts).
	wide, err := CompileSchema([]byte(`{"type":"array","items":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"const":1},`, 1000), ",") + `]}}`))
	if err != nil {
		b.Fatal(err)
	}
	doc := []byte(`[` + strings.TrimSuffix(strings.Repeat(`1,`, 997), ",") + `]`)
	b.Run("validate/1,000,000 steps", func(b *testing.B) {
		for b.Loop() {
			if err := wide.Validate(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
