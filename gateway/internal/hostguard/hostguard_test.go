package hostguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLoopbackHostOnly(t *testing.T) {
	h := LoopbackHostOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for host, want := range map[string]int{
		"127.0.0.1:8081": http.StatusTeapot, "localhost:8081": http.StatusTeapot, "LOCALHOST": http.StatusTeapot,
		"[::1]:8081": http.StatusTeapot, "127.0.0.2": http.StatusTeapot,
		"evil.example:8081": http.StatusForbidden, "evil.example": http.StatusForbidden, "10.0.0.1:8081": http.StatusForbidden,
		"localhost.evil.example": http.StatusForbidden, "": http.StatusForbidden,
	} {
		r := httptest.NewRequest(http.MethodGet, "/console/login", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}

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
