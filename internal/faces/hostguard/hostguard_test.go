package hostguard

import (
	"context"
	"net"
	"net/http"
	"testing"
)

func request(local, host string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.Host = host
	addr, _ := net.ResolveTCPAddr("tcp", local)
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
}

func TestPolicy(t *testing.T) {
	named, err := Parse(" cardex.internal, 10.0.0.7 ,[fd00::1]")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"http://x", "x:8080", "a/b", "a b"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		name          string
		p             Policy
		local, host   string
		origin        string
		hostOK, orgOK bool
	}{
		{"loopback listener, loopback name", Policy{}, "127.0.0.1:8080", "localhost:8080", "http://localhost:8080", true, true},
		{"loopback listener, IPv6", Policy{}, "[::1]:8080", "[::1]:8080", "http://[::1]:8080", true, true},
		{"loopback listener, rebinding name", Policy{}, "127.0.0.1:8080", "rebind.example:8080", "http://rebind.example:8080", false, false},
		{"loopback listener, another local port", Policy{}, "127.0.0.1:8080", "127.0.0.1:8080", "http://127.0.0.1:9999", true, false},
		{"loopback listener, no Host", Policy{}, "127.0.0.1:8080", "", "null", false, false},
		{"loopback listener, a configured name", named, "127.0.0.1:8080", "CARDEX.internal", "https://cardex.internal", true, true},
		{"other listener, no names: any Host, its own origin", Policy{}, "10.0.0.7:8080", "cardex.example:8080", "http://cardex.example:8080", true, true},
		{"other listener, no names: another origin", Policy{}, "10.0.0.7:8080", "cardex.example:8080", "http://evil.example", true, false},
		{"other listener, names: another Host (a probe's)", named, "10.0.0.7:8080", "10.1.2.3:8080", "http://evil.example", true, false},
		{"other listener, names: a named IP", named, "10.0.0.7:8080", "10.0.0.7:8080", "http://10.0.0.7:8080", true, true},
		{"other listener, names: an IPv6 name", named, "10.0.0.7:8080", "[fd00::1]:8080", "http://[fd00::1]:8080", true, true},
		{"a loopback origin to another listener", Policy{}, "10.0.0.7:8080", "10.0.0.7:8080", "http://localhost:8080", true, false},
	} {
		r := request(tc.local, tc.host)
		if got := tc.p.HostAllowed(r, tc.host); got != tc.hostOK {
			t.Errorf("%s: HostAllowed(%q) = %v", tc.name, tc.host, got)
		}
		if got := tc.p.OriginAllowed(r, tc.origin); got != tc.orgOK {
			t.Errorf("%s: OriginAllowed(%q) = %v", tc.name, tc.origin, got)
		}
	}
}
