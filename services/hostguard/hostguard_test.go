package hostguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLoopbackBind(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8081": true, "localhost:8081": true, "[::1]:0": true,
		":8081": false, "0.0.0.0:8081": false, "10.0.0.1:8081": false, "nonsense": false,
	} {
		if got := LoopbackBind(addr); got != want {
			t.Errorf("LoopbackBind(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestNamedHostsOnly: an ops port, whatever its bind, answers a Host that is an
// IP literal (probes and scrapers name the address), localhost, or a
// configured name, and refuses any other name with 403, as a page whose
// name was rebound to the port's address would give.
func TestNamedHostsOnly(t *testing.T) {
	h := NamedHostsOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }), []string{"switchboard-gateway-ops"})
	for host, want := range map[string]int{
		"127.0.0.1:8081": http.StatusTeapot, "10.0.0.7:8081": http.StatusTeapot, "[::1]:8081": http.StatusTeapot,
		"[2001:db8::1]": http.StatusTeapot, "localhost:8081": http.StatusTeapot, "LOCALHOST": http.StatusTeapot,
		"switchboard-gateway-ops:8081": http.StatusTeapot, "Switchboard-Gateway-Ops": http.StatusTeapot,
		"evil.example:8081": http.StatusForbidden, "localhost.evil.example": http.StatusForbidden,
		"switchboard-gateway-ops.evil.example": http.StatusForbidden, "": http.StatusForbidden,
	} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}
