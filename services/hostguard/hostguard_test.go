package hostguard

import "testing"

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
