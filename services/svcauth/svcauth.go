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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
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

// callerForToken finds the credential the call's bearer token names.
// presented reports whether the call sent a bearer token; ok is false
// when it names no credential, and when the call sent more than one
// authorization value: no client of ours sends two, and the tap runs before anything
// is known of the caller, so a header list of many values (gRPC admits
// 16 MiB of them, HPACK sends each repeat in a byte) must cost no more
// than one. The token is hashed once and its digest compared with every
// stored digest in constant time, never stopping at a match, so timing
// reveals neither how much of a token matched nor which entry did.
func (a *credentialTable) callerForToken(ctx context.Context) (c Caller, hostedBy string, presented, ok bool) {
	// Only the authorization values are read (copied), not the whole
	// metadata.
	values := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(values) == 0 {
		return Caller{}, "", false, false
	}
	if len(values) > 1 {
		return Caller{}, "", true, false
	}
	tok, found := BearerCredential(values[0])
	if !found {
		return Caller{}, "", false, false
	}
	digest := sha256.Sum256([]byte(tok))
	var match *tokenEntry
	for i := range a.byToken {
		if digestsEqual(&a.byToken[i].digest, &digest) {
			match = &a.byToken[i]
		}
	}
	if match == nil {
		return Caller{}, "", true, false
	}
	return match.caller, match.hostedBy, true, true
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

// callCarrier is a request that carries a tool call, whose own principal
// is "the same as" the request's (CallToolStreamRequest,
// ResumeHeldCallRequest, ResumeHeldCallStreamRequest).
type callCarrier interface {
	GetCall() *aggregatorv1.CallToolRequest
}

// resolveRequest decides the principal a request acts for: its top-level
// principal, as Resolve decides it. A principal in the call it carries
// is checked exactly as the top-level one (its bounds, and for a caller
// that may not assert principals, that it names the caller's own
// identity) though the services act on the top-level one: a principal a
// request names is never passed over unchecked.
func resolveRequest(c Caller, req any) (*commonv1.Principal, error) {
	var requested *commonv1.Principal
	if pc, ok := req.(principalCarrier); ok {
		requested = pc.GetPrincipal()
	}
	p, err := Resolve(c, requested)
	if err != nil {
		return nil, err
	}
	if cc, ok := req.(callCarrier); ok {
		if _, err := Resolve(c, cc.GetCall().GetPrincipal()); err != nil {
			return nil, err
		}
	}
	return p, nil
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

// BearerCredential is the token of an authorization value of the Bearer
// scheme, which, like every HTTP authentication scheme, is matched
// without regard to case (RFC 9110, section 11.1): "bearer x" is as good
// as "Bearer x". Both the gateway's HTTP edge and the services' gRPC
// authentication read a token through it.
func BearerCredential(authorization string) (token string, ok bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
