package cards

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestAddLearned(t *testing.T) {
	var many []string
	for i := range MaxLearned + 3 {
		many = append(many, fmt.Sprintf("p%d", i))
	}
	tests := []struct {
		name    string
		have    []string
		add     []string
		want    []string
		changed bool
	}{
		{"nothing", nil, nil, nil, false},
		{"sanitised", nil, []string{" a\u200b  b\n"}, []string{"a b"}, true},
		{"empty dropped", []string{"x"}, []string{"", " \u202e "}, []string{"x"}, false},
		{"case-insensitive duplicate", []string{"Track Order"}, []string{"track order", "TRACK ORDER"}, []string{"Track Order"}, false},
		{"duplicates within the call", nil, []string{"a", "A", "b"}, []string{"a", "b"}, true},
		{"latest kept", nil, many, many[3:], true},
		{"cut", nil, []string{strings.Repeat("x", MaxLearnedLen) + "  tail"}, []string{strings.Repeat("x", MaxLearnedLen)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.have)
			got, changed := AddLearned(tc.have, tc.add...)
			if !slices.Equal(got, tc.want) || changed != tc.changed {
				t.Errorf("AddLearned = %q, %v; want %q, %v", got, changed, tc.want, tc.changed)
			}
			if !slices.Equal(tc.have, before) {
				t.Errorf("AddLearned modified its input: %q", tc.have)
			}
		})
	}
}
