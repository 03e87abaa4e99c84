// Package svcauth authenticates gRPC callers between Switchboard services and
// decides which end-user principal a request acts for.
//
// The rule it enforces: a principal named in a request is believed only when
// the gRPC caller authenticated as a service trusted to assert principals
// (the gateway, the indexer). Every other authenticated caller acts as the
// identity bound to its own credential, and naming someone else is rejected.
// A call with no valid credential is rejected before any handler runs, and
// so is a call of a method the caller's credential does not allow
// (allow.go). Tokens are compared as SHA-256 digests only, and a call that
// sends a verified client certificate and a token is admitted only when
// both name one credential (Authenticate).
package svcauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Caller is an authenticated service identity.
type Caller struct {
	Name             string
	AssertPrincipals bool
	// Operator: the credential of the people running the deployment
	// (serviceAuth.credentials[].operator), who see what other callers see
	// only redacted.
	Operator bool
	// Bound is the identity of a caller that may not assert principals.
	Bound *commonv1.Principal
	// AuditService is the service whose audit events the credential may
	// write (config.ServiceCredential.EffectiveAuditService); "" for none.
	AuditService string
	// Identity says how the caller authenticated as its credential: "token"
	// for its bearer token, or the verified client certificate's name that
	// named it, "uriSAN <uri>", "dnsSAN <name>" or "commonName <name>".
	// Never the token itself.
	Identity string
	allow    config.MethodSet
}

// How a caller authenticated (Caller.Identity).
const (
	identityToken      = "token"
	identityURISAN     = "uriSAN "
	identityDNSSAN     = "dnsSAN "
	identityCommonName = "commonName "
)

// MayCall reports whether the caller's credential allows fullMethod
// ("/package.Service/Method").
func (c Caller) MayCall(fullMethod string) bool { return c.allow.Permits(fullMethod) }

// IsEdge reports whether the caller is an edge: a credential that asserts
// end users' principals and is no operator's (the gateway's). An edge's
// requests are the principal's own; any other caller's (an operator's
// console, a service calling as its bound identity) are that credential's,
// and the audit trail names it (audit.Event.Caller).
func (c Caller) IsEdge() bool { return c.AssertPrincipals && !c.Operator }

// Authenticator checks service credentials. Its credentials can be
// replaced while it serves (Update): each call is checked against one
// table, the old or the new, never a mix.
type Authenticator struct {
	table atomic.Pointer[credentialTable]
}

// credentialTable is one set of credentials, looked up by token and by
// certificate identity.
type credentialTable struct {
	byToken []tokenEntry
	// Certificate identities: URI and DNS subject alternative names, and
	// subject common names.
	byURI, byDNS, byCN map[string]*Caller
}

// tokenEntry is a credential's token, kept as its SHA-256 only: the
// configured token is hashed when the table is built, and a
// tokenSHA256 is taken as it is (config.ServiceCredential.TokenDigest),
// so both forms are compared the same way.
type tokenEntry struct {
	digest [sha256.Size]byte
	caller Caller
	// hostedBy names the credential whose verified client certificate
	// may carry this token (config.ServiceCredential.HostedBy).
	hostedBy string
}

// digestsEqual compares two token digests in constant time (a variable
// so that a test can see every comparison).
var digestsEqual = func(a, b *[sha256.Size]byte) bool {
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// NewAuthenticator builds an authenticator from the configured credentials
// (checked by config.ServiceAuth.Validate). Credentials with no token and
// no certificate identity are ignored, and empty tokens never match, so a
// missing secret cannot open the door; a credential without an allow list
// may call nothing.
func NewAuthenticator(creds []config.ServiceCredential) *Authenticator {
	a := &Authenticator{}
	a.Update(creds)
	return a
}

// Update replaces the credentials (a configuration reload): calls that
// start afterwards are checked against creds alone. Calls and streams
// already admitted carry on as the caller they were admitted as.
func (a *Authenticator) Update(creds []config.ServiceCredential) {
	a.table.Store(newCredentialTable(creds))
}

func newCredentialTable(creds []config.ServiceCredential) *credentialTable {
	a := &credentialTable{byURI: map[string]*Caller{}, byDNS: map[string]*Caller{}, byCN: map[string]*Caller{}}
	for _, c := range creds {
		caller := &Caller{Name: c.Name, AssertPrincipals: c.AssertPrincipals, Operator: c.Operator, AuditService: c.EffectiveAuditService(),
			allow: config.NewMethodSet(c.Allow)}
		if !c.AssertPrincipals {
			caller.Bound = &commonv1.Principal{Subject: c.Subject, Groups: slices.Clone(c.Groups)}
		}
		if d, ok := c.TokenDigest(); ok {
			byToken := *caller
			byToken.Identity = identityToken
			a.byToken = append(a.byToken, tokenEntry{digest: d, caller: byToken, hostedBy: c.HostedBy})
		}
		for _, id := range []struct {
			by   map[string]*Caller
			name string
		}{{a.byURI, c.URISAN}, {a.byDNS, c.DNSSAN}, {a.byCN, c.CommonName}} {
			if id.name != "" {
				id.by[id.name] = caller
			}
		}
	}
	return a
}

// Authenticate identifies the caller of an incoming call from its bearer
// token and its verified mTLS client certificate. A call that presents
// both is admitted only when they name the same credential, or the
// token's credential is hosted by the certificate's (hostedBy): a token
// sent with another service's certificate, or with a certificate that
// names no credential, authenticates as nobody, so that mTLS limits who
// can use a token. A call that presents one of them is the credential it
// names.
func (a *Authenticator) Authenticate(ctx context.Context) (Caller, bool) {
	return a.table.Load().authenticate(ctx)
}

func (a *credentialTable) authenticate(ctx context.Context) (Caller, bool) {
	byToken, hostedBy, presented, tokenOK := a.callerForToken(ctx)
	certs := verifiedLeaves(ctx)
	switch {
	case presented && len(certs) > 0:
		if !tokenOK {
			return Caller{}, false
		}
		for _, cert := range certs {
			if c, ok := a.callerForCert(cert); ok && (c.Name == byToken.Name || c.Name == hostedBy) {
				return byToken, true
			}
		}
		return Caller{}, false
	case presented:
		return byToken, tokenOK
	}
	for _, cert := range certs {
		if c, ok := a.callerForCert(cert); ok {
			return c, true
		}
	}
	return Caller{}, false
}

// callerForToken finds the credential the call's bearer tokens name.
// presented reports whether the call sent any; ok is false when none of
// them names a credential, or they name two. Each presented token is
// hashed once and its digest compared with every stored digest in
// constant time, never stopping at a match, so timing reveals neither how
// much of a token matched nor which entry did.
func (a *credentialTable) callerForToken(ctx context.Context) (c Caller, hostedBy string, presented, ok bool) {
	// Only the authorization values are read (copied), not the whole
	// metadata.
	var match *tokenEntry
	ambiguous := false
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		tok, found := strings.CutPrefix(v, "Bearer ")
		if !found || tok == "" {
			continue
		}
		presented = true
		digest := sha256.Sum256([]byte(tok))
		for i := range a.byToken {
			if digestsEqual(&a.byToken[i].digest, &digest) {
				ambiguous = ambiguous || (match != nil && match.caller.Name != a.byToken[i].caller.Name)
				match = &a.byToken[i]
			}
		}
	}
	if match == nil || ambiguous {
		return Caller{}, "", presented, false
	}
	return match.caller, match.hostedBy, presented, true
}

// verifiedLeaves are the client certificates of the call's connection
// that the TLS handshake verified (the leaf of each verified chain); none
// without mTLS.
func verifiedLeaves(ctx context.Context) []*x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	var out []*x509.Certificate
	for _, chain := range ti.State.VerifiedChains {
		if len(chain) > 0 {
			out = append(out, chain[0])
		}
	}
	return out
}

// callerForCert finds the credential a verified client certificate names:
// by its URI subject alternative names first, then its DNS ones; by its
// subject common name only when it has neither (a certificate with
// alternative names is identified by them, as TLS clients identify
// servers, so its common name cannot make it another service). A
// certificate whose names of one kind point at two different credentials
// names none (an issuing mistake, not a choice for this code to make).
func (a *credentialTable) callerForCert(cert *x509.Certificate) (Caller, bool) {
	uris := make([]string, len(cert.URIs))
	for i, u := range cert.URIs {
		uris[i] = u.String()
	}
	var commonName []string
	if len(uris) == 0 && len(cert.DNSNames) == 0 {
		commonName = []string{cert.Subject.CommonName}
	}
	for _, kind := range []struct {
		names []string
		by    map[string]*Caller
		as    string
	}{{uris, a.byURI, identityURISAN}, {cert.DNSNames, a.byDNS, identityDNSSAN}, {commonName, a.byCN, identityCommonName}} {
		var found *Caller
		var foundAs string
		for _, name := range kind.names {
			c, ok := kind.by[name]
			if !ok {
				continue
			}
			if found != nil && found != c {
				return Caller{}, false
			}
			if found == nil {
				foundAs = kind.as + name
			}
			found = c
		}
		if found != nil {
			c := *found
			c.Identity = foundAs
			return c, true
		}
	}
	return Caller{}, false
}

type callerKey struct{}
type principalKey struct{}

// CallerFrom returns the authenticated caller of the current call.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// PrincipalFrom returns the principal the current call acts for, as decided
// by the interceptors. It is never nil inside a handler.
func PrincipalFrom(ctx context.Context) *commonv1.Principal {
	if p, ok := ctx.Value(principalKey{}).(*commonv1.Principal); ok {
		return p
	}
	return &commonv1.Principal{}
}

// WithPrincipal returns ctx carrying p as the effective principal (tests and
// in-process callers).
func WithPrincipal(ctx context.Context, p *commonv1.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type principalCarrier interface {
	GetPrincipal() *commonv1.Principal
}

// Resolve decides the effective principal for a request that named
// requested (nil if the request carries no principal). A requested
// principal past its bounds (MaxSubjectBytes, MaxGroups, MaxGroupBytes,
// MaxGroupsBytes) is INVALID_ARGUMENT.
func Resolve(c Caller, requested *commonv1.Principal) (*commonv1.Principal, error) {
	if err := CheckPrincipal(requested); err != nil {
		return nil, err
	}
	if c.AssertPrincipals {
		if requested == nil {
			return &commonv1.Principal{}, nil
		}
		return normalize(requested), nil
	}
	bound := normalize(c.Bound)
	if requested != nil && (requested.GetSubject() != "" || len(requested.GetGroups()) > 0) {
		r := normalize(requested)
		if r.GetSubject() != bound.GetSubject() || !slices.Equal(r.GetGroups(), bound.GetGroups()) {
			return nil, apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED, "caller may not act for the requested principal")
		}
	}
	return bound, nil
}

// normalize sorts and de-duplicates groups so that equal identities compare
// equal whatever order their groups arrived in.
func normalize(p *commonv1.Principal) *commonv1.Principal {
	if p == nil {
		return &commonv1.Principal{}
	}
	g := slices.Clone(p.GetGroups())
	slices.Sort(g)
	g = slices.Compact(g)
	return &commonv1.Principal{Subject: p.GetSubject(), Groups: g}
}

var errUnauthenticated = apierr.New(codes.Unauthenticated, commonv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid service credentials")

// UnaryInterceptor authenticates the caller, checks that its credential
// allows the method, and resolves the principal of requests that carry
// one. Health checks and reflection are exempt so that
// probes and grpcurl discovery work without credentials; they reveal nothing
// about users.
func (a *Authenticator) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if exempt(info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, c, err := a.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		var requested *commonv1.Principal
		if pc, ok := req.(principalCarrier); ok {
			requested = pc.GetPrincipal()
		}
		p, err := Resolve(c, requested)
		if err != nil {
			return nil, err
		}
		return handler(context.WithValue(ctx, principalKey{}, p), req)
	}
}

// Tap authenticates a call and checks its credential's allow list from
// the call's headers alone (grpc.InTapHandle), before gRPC reads any of
// its messages: a caller without a credential costs the server no
// decoding of what it sends and gets UNAUTHENTICATED, not a decoder's
// error. gRPC runs it on the connection's reader, under the transport's
// lock: it hashes a token and looks a credential up, nothing that waits.
// The interceptors take the caller it found.
func (a *Authenticator) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if exempt(info.FullMethodName) {
		return ctx, nil
	}
	ctx, _, err := a.admit(ctx, info.FullMethodName)
	return ctx, err
}

// admit authenticates the call in ctx and checks that its credential
// allows fullMethod, and returns ctx with the caller in it (once Tap
// admitted the call, the caller it found).
func (a *Authenticator) admit(ctx context.Context, fullMethod string) (context.Context, Caller, error) {
	if c, ok := CallerFrom(ctx); ok {
		return ctx, c, nil
	}
	c, ok := a.Authenticate(ctx)
	if !ok {
		return ctx, Caller{}, errUnauthenticated
	}
	if !c.MayCall(fullMethod) {
		return ctx, Caller{}, errMethodNotAllowed(fullMethod)
	}
	return context.WithValue(ctx, callerKey{}, c), c, nil
}

// StreamInterceptor does the same for server-streaming calls: the principal
// is resolved from the first (only) request message.
func (a *Authenticator) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if exempt(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx, c, err := a.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &principalStream{ServerStream: ss, ctx: ctx, caller: c})
	}
}

type principalStream struct {
	grpc.ServerStream
	ctx    context.Context
	caller Caller
}

func (s *principalStream) Context() context.Context { return s.ctx }

func (s *principalStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	var requested *commonv1.Principal
	if pc, ok := m.(principalCarrier); ok {
		requested = pc.GetPrincipal()
	}
	p, err := Resolve(s.caller, requested)
	if err != nil {
		return err
	}
	s.ctx = context.WithValue(s.ctx, principalKey{}, p)
	return nil
}

func exempt(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// LiveToken attaches a bearer token to outgoing calls, like
// TokenCredentials, and can be replaced while the connection serves (a
// configuration reload): each call carries the token in force when it
// starts. An empty token sends no authorization.
type LiveToken struct {
	// metadata is what every call carries, built once per token: gRPC only
	// reads it (into a map of its own), so calls share it.
	metadata atomic.Pointer[map[string]string]
	secure   bool
}

// NewLiveToken returns a LiveToken holding token; secure requires
// transport security (see TokenCredentials.Secure).
func NewLiveToken(token string, secure bool) *LiveToken {
	t := &LiveToken{secure: secure}
	t.Set(token)
	return t
}

// Set replaces the token.
func (t *LiveToken) Set(token string) {
	var md map[string]string
	if token != "" {
		md = map[string]string{"authorization": "Bearer " + token}
	}
	t.metadata.Store(&md)
}

// GetRequestMetadata implements credentials.PerRPCCredentials. The map is
// shared by every call and must not be modified.
func (t *LiveToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return *t.metadata.Load(), nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (t *LiveToken) RequireTransportSecurity() bool { return t.secure }

// TokenCredentials attaches a bearer token to outgoing calls.
type TokenCredentials struct {
	Token string
	// Secure requires transport security, so the token is not sent in the
	// clear to a remote host. Loopback development runs set it false.
	Secure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (t TokenCredentials) RequireTransportSecurity() bool { return t.Secure }
