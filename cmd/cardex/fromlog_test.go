package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEvalFromLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "feedback.jsonl")
	lines := []string{
		`{"type":"outcome","time":"2026-11-30T01:00:00Z","tenant":"acme","discovery_id":"d1","query":"parcel late","tool":{"server":"orders","name":"track_shipment"},"miss":true}`,
		`{"type":"outcome","time":"2026-11-30T01:00:01Z","tenant":"acme","discovery_id":"d2","query":"get order","tool":{"server":"orders","name":"get_order"},"miss":false}`,
		`{"type":"implicit_miss","time":"2026-11-30T01:00:02Z","tenant":"acme","discovery_id":"d3","query_hash":"ab12","tool":{"server":"orders","name":"get_order"},"miss":true}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, "eval", "--from-log", path)
	if err != nil {
		t.Fatalf("eval --from-log: %v\n%s", err, errOut)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 1 {
		t.Fatalf("stdout rows %q: want the one miss with a query", rows)
	}
	var q struct {
		ID, Query string
		Expected  []string
	}
	if err := json.Unmarshal([]byte(rows[0]), &q); err != nil || q.Query != "parcel late" || len(q.Expected) != 1 || q.Expected[0] != "orders/track_shipment" {
		t.Errorf("row %s (%v)", rows[0], err)
	}
	if !strings.Contains(errOut, "1 misses skipped") {
		t.Errorf("stderr %q should count the hashed miss", errOut)
	}
	if _, _, err := runCLI(t, "eval"); err == nil {
		t.Error("eval with neither DIR nor --from-log was accepted")
	}
}
