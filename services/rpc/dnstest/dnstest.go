// Package dnstest is a small authoritative DNS server over UDP for tests
// of balancing clients: it answers A and AAAA questions for the names it
// is given with the addresses it is given (changeable while it runs), so
// a dns://server/name:port target resolves, through gRPC's own DNS
// resolver and real DNS messages, to several loopback addresses
// (127.0.0.1, 127.0.0.2, ...), as a headless Kubernetes Service resolves
// to its ready pods.
package dnstest

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// Server answers DNS questions on a loopback UDP port.
type Server struct {
	conn *net.UDPConn
	wg   sync.WaitGroup

	mu      sync.Mutex
	records map[string][]netip.Addr // by lower-case name with a final dot
	queries map[string]int          // A and AAAA questions asked, by name
}

// Start listens on 127.0.0.1 and serves until Close.
func Start() (*Server, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	s := &Server{conn: conn, records: map[string][]netip.Addr{}, queries: map[string]int{}}
	s.wg.Go(s.serve)
	return s, nil
}

// Addr is the server's host:port, the authority of a dns://addr/name:port
// target.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// Set makes name resolve to addrs (none: the name exists without
// addresses).
func (s *Server) Set(name string, addrs ...netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[fqdn(name)] = append([]netip.Addr(nil), addrs...)
}

// Queries reports how many A and AAAA questions name was asked.
func (s *Server) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[fqdn(name)]
}

// Close stops the server.
func (s *Server) Close() error {
	err := s.conn.Close()
	s.wg.Wait()
	return err
}

func fqdn(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

func (s *Server) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if out, ok := s.answer(buf[:n]); ok {
			_, _ = s.conn.WriteToUDPAddrPort(out, from)
		}
	}
}

// answer builds the reply to one query; a message that is not one
// question is dropped.
func (s *Server) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	addrs, known := s.records[name]
	if q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeAAAA {
		s.queries[name]++
	}
	s.mu.Unlock()

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	// A TTL of zero: every resolution asks again, so a test that changes
	// the records sees the change at the client's next resolution.
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
	for _, a := range addrs {
		var err error
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			err = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6():
			err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, false
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
