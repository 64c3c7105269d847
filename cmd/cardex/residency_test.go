package main

import "testing"

func TestParseResidencyFlags(t *testing.T) {
	sizes := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"512MiB", 512 << 20, true}, {"2GiB", 2 << 30, true}, {"1.5GiB", 3 << 29, true},
		{"500MB", 500e6, true}, {"64KiB", 64 << 10, true}, {"0", 0, false}, {"-1GiB", 0, false}, {"lots", 0, false}, {"2XB", 0, false},
	}
	for _, tt := range sizes {
		got, err := parseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
	shards := []struct {
		in   string
		i, n int
		ok   bool
	}{{"0/3", 0, 3, true}, {"2/3", 2, 3, true}, {"3/3", 0, 0, false}, {"-1/3", 0, 0, false}, {"1", 0, 0, false}, {"0/0", 0, 0, false}, {"a/b", 0, 0, false}}
	for _, tt := range shards {
		i, n, err := parseShard(tt.in)
		if (err == nil) != tt.ok || i != tt.i || n != tt.n {
			t.Errorf("parseShard(%q) = %d, %d, %v; want %d, %d (ok %v)", tt.in, i, n, err, tt.i, tt.n, tt.ok)
		}
	}
	f := residencyFlags{tenants: "acme", shard: "0/2"}
	if _, _, err := f.option(nil); err == nil {
		t.Error("--tenants with --shard: no error")
	}
	f = residencyFlags{tenants: "acme,bad name"}
	if _, _, err := f.option(nil); err == nil {
		t.Error("--tenants with an invalid id: no error")
	}
	if _, ok, err := (&residencyFlags{}).option(nil); ok || err != nil {
		t.Errorf("no flags: residency %v, %v; want none", ok, err)
	}
}
