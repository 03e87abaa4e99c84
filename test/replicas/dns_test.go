package replicas

import (
	"net/netip"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/rpc/dnstest"
)

// startDNS serves names (without the trailing dot) until the test ends and
// returns the server's address: gRPC's dns resolver is pointed at it with
// the target's authority (dns://<server>/<name>:<port>), as a Kubernetes
// headless Service's name resolves to every ready pod, and nothing of the
// machine's own resolver configuration is touched.
func startDNS(t *testing.T, names map[string][]netip.Addr) string {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for name, addrs := range names {
		s.Set(name, addrs...)
	}
	return s.Addr()
}
