package discoverylog

import (
	"encoding/json"
	"math"
	"strconv"
)

// appendEntry appends e as json.Marshal encodes it, byte for byte, without
// reflection (the writer's cost per discovery: json.Marshal took about
// 8 µs of CPU an entry). ok is false, with b as given, for an entry it does
// not encode itself (a float that is NaN or infinite, a time that
// json.Marshal refuses): the caller then uses json.Marshal, which decides.
// A string with any character json.Marshal escapes (or may: non-ASCII,
// HTML, control) is encoded by json.Marshal itself; plain ASCII is copied.
func appendEntry(b []byte, e *Entry) (_ []byte, ok bool) {
	start := len(b)
	fail := func() ([]byte, bool) { return b[:start], false }
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"time":"`...)
	t, err := e.Time.AppendText(b)
	if err != nil {
		return fail()
	}
	b = append(t, `","tenant":`...)
	b = appendString(b, e.Tenant)
	b = appendOptString(b, `,"subject_hash":`, e.SubjectHash)
	b = appendOptString(b, `,"session_id":`, e.SessionID)
	b = appendOptString(b, `,"query":`, e.Query)
	b = appendOptString(b, `,"query_hash":`, e.QueryHash)
	b = appendOptStrings(b, `,"intents":`, e.Intents)
	b = appendOptStrings(b, `,"intent_hashes":`, e.IntentHashes)
	b = append(b, `,"top_k":`...)
	b = strconv.AppendInt(b, int64(e.TopK), 10)
	b = append(b, `,"returned":`...)
	if e.Returned == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.Returned {
			r := &e.Returned[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"server":`...)
			b = appendString(b, r.Server)
			b = append(b, `,"name":`...)
			b = appendString(b, r.Name)
			b = append(b, `,"score":`...)
			if b, ok = appendFloat(b, r.Score); !ok {
				return fail()
			}
			if r.Pinned {
				b = append(b, `,"pinned":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"candidate_count":`...)
	b = strconv.AppendInt(b, int64(e.CandidateCount), 10)
	b = append(b, `,"latency_ms":`...)
	if b, ok = appendFloat(b, e.LatencyMS); !ok {
		return fail()
	}
	if e.LowConfidence {
		b = append(b, `,"low_confidence":true`...)
	}
	if e.Degraded {
		b = append(b, `,"degraded":true`...)
	}
	if e.Abstained {
		b = append(b, `,"abstained":true`...)
	}
	return append(b, '}'), true
}

func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

func appendOptStrings(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s quoted: copied when every byte is printable ASCII
// that JSON and json.Marshal's HTML escaping leave alone, else as
// json.Marshal gives it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat appends f as json.Marshal does for a float64 in plain
// notation (0, or a magnitude in [1e-6, 1e21)); false for any other
// (exponent form, NaN, infinities), which it leaves to json.Marshal.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) || math.IsNaN(f) {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return b, false
		}
		q, _ := json.Marshal(f)
		return append(b, q...), true
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), true
}
