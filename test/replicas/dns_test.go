package replicas

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers A queries for a fixed set of names over UDP, as a
// Kubernetes headless Service's name resolves to every ready pod. gRPC's
// dns resolver is pointed at it with the target's authority
// (dns://<server>/<name>:<port>), so nothing of the machine's own
// resolver configuration is touched. Other names get NXDOMAIN; other
// record types of a known name get an empty answer.
type dnsServer struct {
	conn  net.PacketConn
	names map[string][]netip.Addr // fully qualified, lower case
}

// startDNS serves names (without the trailing dot) until the test ends and
// returns the server's address.
func startDNS(t *testing.T, names map[string][]netip.Addr) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn, names: map[string][]netip.Addr{}}
	for name, addrs := range names {
		s.names[strings.ToLower(name)+"."] = addrs
	}
	done := make(chan struct{})
	go func() { defer close(done); s.serve(t) }()
	t.Cleanup(func() { conn.Close(); <-done })
	return conn.LocalAddr().String()
}

func (s *dnsServer) serve(t *testing.T) {
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("dns server: %v", err)
			}
			return
		}
		if reply, ok := s.answer(buf[:n]); ok {
			_, _ = s.conn.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to one query; a message that is not a query
// with one question gets none.
func (s *dnsServer) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	reply := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired},
		Questions: []dnsmessage.Question{q},
	}
	addrs, known := s.names[strings.ToLower(q.Name.String())]
	switch {
	case !known:
		reply.Header.RCode = dnsmessage.RCodeNameError
	case q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET:
		for _, a := range addrs {
			reply.Answers = append(reply.Answers, dnsmessage.Resource{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1},
				Body:   &dnsmessage.AResource{A: a.As4()},
			})
		}
	}
	out, err := reply.Pack()
	return out, err == nil
}

// TestDNSServer: the names resolve to their addresses through Go's own
// resolver, as gRPC's dns resolver asks them, and other names do not.
func TestDNSServer(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}
	addr := startDNS(t, map[string][]netip.Addr{"aggregators.switchboard.test": want})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	got, err := r.LookupHost(t.Context(), "aggregators.switchboard.test")
	if err != nil || strings.Join(got, ",") != "127.0.0.1,127.0.0.2" {
		t.Fatalf("lookup = %v %v, want %v", got, err, want)
	}
	if got, err := r.LookupHost(t.Context(), "nobody.switchboard.test"); err == nil {
		t.Fatalf("an unknown name resolved to %v", got)
	}
}
