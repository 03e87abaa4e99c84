package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Validate reports what would make the gRPC services' authentication
// ambiguous or open: a credential without a name or without an allow list,
// a malformed method pattern, a token given both as itself and as its
// SHA-256 or as a malformed digest, a hostedBy that names no other
// credential, two credentials sharing a name, a token (in either form) or
// a certificate identity, and TLS files given by halves. Credentials whose
// token and certificate identities are all empty are kept (they match no
// caller: a pod that lacks another service's secret sees it that way).
func (a ServiceAuth) Validate() error {
	var errs []error
	seen := map[string]string{} // "kind value" -> credential name
	names := map[string]int{}   // name -> index of the first credential of it
	for i, c := range a.Credentials {
		where := fmt.Sprintf("serviceAuth.credentials[%d]", i)
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		} else {
			where += " (" + c.Name + ")"
			// A token and a certificate presented together must name one
			// credential, which the services tell by its name (so do
			// hostedBy, the stream bounds, the metrics and the trail).
			if first, dup := names[c.Name]; dup {
				errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].name", i), "is also credentials[%d]'s: each credential has a name of its own", first))
			} else {
				names[c.Name] = i
			}
		}
		if len(c.Allow) == 0 {
			errs = append(errs, fmt.Errorf("%s: role or allow is required: name the credential's role, or list the RPCs it may call (docs/configuration.md)", where))
		}
		for j, p := range c.Allow {
			if _, _, err := ParseMethodPattern(p); err != nil {
				errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].allow[%d]", i, j), "%w", err))
			}
		}
		if c.AuditService != "" && !slices.Contains(AuditServices, c.AuditService) {
			errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].auditService", i), "want %s or %s", strings.Join(AuditServices[:len(AuditServices)-1], ", "), AuditServices[len(AuditServices)-1]))
		}
		if c.Token != "" && c.TokenSHA256 != "" {
			errs = append(errs, fmt.Errorf("%s: token and tokenSHA256 are two forms of one token: set one", where))
		}
		if c.TokenSHA256 != "" && !validTokenSHA256(c.TokenSHA256) {
			errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].tokenSHA256", i), "want the token's SHA-256 as 64 hexadecimal digits"))
		}
		switch {
		case c.HostedBy == "":
		case c.HostedBy == c.Name:
			errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].hostedBy", i), "names the credential itself"))
		case !slices.ContainsFunc(a.Credentials, func(o ServiceCredential) bool { return o.Name == c.HostedBy }):
			errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].hostedBy", i), "names no credential: name the credential whose client certificate carries this token"))
		}
		// A token and a digest are compared as the token's SHA-256, so
		// the two forms of one token are the same identity.
		ids := []struct{ kind, key, value string }{
			{"token", "tokenSHA256", ""}, {"uriSAN", "uriSAN", c.URISAN}, {"dnsSAN", "dnsSAN", c.DNSSAN}, {"commonName", "commonName", c.CommonName},
		}
		if d, ok := c.TokenDigest(); ok {
			ids[0].value = hex.EncodeToString(d[:])
			if c.Token != "" {
				ids[0].key = "token"
			}
		}
		for _, id := range ids {
			if id.value == "" {
				continue
			}
			key := id.kind + " " + id.value
			if other, dup := seen[key]; dup {
				errs = append(errs, keyErr(fmt.Sprintf("serviceAuth.credentials[%d].%s", i, id.key), "is also %s's: each identity names one credential", other))
			}
			seen[key] = c.Name
		}
	}
	if t := a.TLS; (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("serviceAuth.tls: certFile and keyFile go together"))
	}
	if t := a.TLS; t.ClientCAFile != "" && t.CertFile == "" {
		errs = append(errs, errors.New("serviceAuth.tls.clientCAFile needs certFile and keyFile: client certificates are verified on a TLS server"))
	}
	return errors.Join(errs...)
}

// validTokenSHA256 reports whether s is a SHA-256 digest written as 64
// hexadecimal digits (either case).
func validTokenSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// TokenDigest is the SHA-256 of the credential's bearer token: of Token,
// or TokenSHA256 decoded. ok is false when the credential has neither (or
// a malformed TokenSHA256, which Validate refuses). The service
// authenticator compares presented tokens with this digest alone,
// whichever form the configuration gave.
func (c ServiceCredential) TokenDigest() (d [sha256.Size]byte, ok bool) {
	switch {
	case c.Token != "":
		return sha256.Sum256([]byte(c.Token)), true
	case c.TokenSHA256 != "" && validTokenSHA256(c.TokenSHA256):
		_, _ = hex.Decode(d[:], []byte(c.TokenSHA256))
		return d, true
	}
	return d, false
}

// AuditServices are the services that write audit events, the values of
// serviceAuth.credentials[].auditService (services/audit has the kinds
// each records).
var AuditServices = []string{"aggregator", "gateway", "indexer"}

// EffectiveAuditService is the service whose audit events the credential
// may write: AuditService, or when that is unset the credential's name if
// it names one of AuditServices; "" for none.
func (c ServiceCredential) EffectiveAuditService() string {
	if c.AuditService != "" {
		return c.AuditService
	}
	if slices.Contains(AuditServices, c.Name) {
		return c.Name
	}
	return ""
}

// ParseMethodPattern reads one allow entry: a full gRPC method name,
// "package.Service/Method", or every method of a service,
// "package.Service/*" (a leading "/" is allowed, as in gRPC's full method
// names). method is "*" for the service-wide form.
func ParseMethodPattern(p string) (service, method string, err error) {
	service, method, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !ok || !validName(service, true) || (method != "*" && !validName(method, false)) {
		return "", "", errors.New("not package.Service/Method or package.Service/*")
	}
	return service, method, nil
}

// validName accepts a protobuf identifier, or a dotted full name of at
// least two parts when dotted is set.
func validName(s string, dotted bool) bool {
	parts := strings.Split(s, ".")
	if dotted && len(parts) < 2 || !dotted && len(parts) != 1 {
		return false
	}
	for _, part := range parts {
		if part == "" {
			return false
		}
		for i, r := range part {
			letter := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
			if !letter && (i == 0 || r < '0' || r > '9') {
				return false
			}
		}
	}
	return true
}

// Built-in allow lists, for the credentials of the services themselves.
var (
	// GatewayMethods are the RPCs the gateway calls: every catalog read and
	// call of the aggregator but ListBackends, the indexer's search, and
	// the session revocations, the record of used request states, the
	// Legacy session states and relayed input answers, tasks, and the
	// rate-limit tokens of the requests it refuses itself.
	GatewayMethods = []string{
		"switchboard.aggregator.v1.AggregatorService/Discover",
		"switchboard.aggregator.v1.AggregatorService/ListTools",
		"switchboard.aggregator.v1.AggregatorService/ListResources",
		"switchboard.aggregator.v1.AggregatorService/ListResourceTemplates",
		"switchboard.aggregator.v1.AggregatorService/ListPrompts",
		"switchboard.aggregator.v1.AggregatorService/CallTool",
		"switchboard.aggregator.v1.AggregatorService/CallToolStream",
		"switchboard.aggregator.v1.AggregatorService/ReadResource",
		"switchboard.aggregator.v1.AggregatorService/GetPrompt",
		"switchboard.aggregator.v1.AggregatorService/Complete",
		"switchboard.aggregator.v1.AggregatorService/WatchCatalog",
		"switchboard.aggregator.v1.AggregatorService/GetTask",
		"switchboard.aggregator.v1.AggregatorService/UpdateTask",
		"switchboard.aggregator.v1.AggregatorService/CancelTask",
		"switchboard.aggregator.v1.AggregatorService/ListTasks",
		"switchboard.aggregator.v1.AggregatorService/RunCode",
		"switchboard.indexer.v1.IndexerService/Search",
		"switchboard.indexer.v1.IndexerService/RevokeSession",
		"switchboard.indexer.v1.IndexerService/CheckSession",
		"switchboard.indexer.v1.IndexerService/WatchRevocations",
		"switchboard.indexer.v1.IndexerService/ConsumeRequestState",
		"switchboard.indexer.v1.IndexerService/UpdateSessionState",
		"switchboard.indexer.v1.IndexerService/WatchSessionEvents",
		"switchboard.indexer.v1.IndexerService/RelayInputResponse",
		"switchboard.indexer.v1.IndexerService/RelayCancellation",
		"switchboard.indexer.v1.IndexerService/AcquireRateTokens",
		"switchboard.indexer.v1.IndexerService/RecordAuditEvents",
	}
	// AggregatorMethods are the RPCs an aggregator calls with its own
	// credential: on its peers the resumption of a call a peer holds
	// (aggregator.peers), on the indexer the record of its backends' tool
	// definitions and the stream of approvals (aggregator.pinning), never
	// the approval itself, which is an operator's; the rate-limit tokens of
	// its calls (rateLimits); and the storing of its audit events
	// (audit.database); and the tasks it runs (aggregator.tasks).
	AggregatorMethods = []string{
		"switchboard.aggregator.v1.AggregatorService/ResumeHeldCall",
		"switchboard.indexer.v1.IndexerService/RecordToolDefinitions",
		"switchboard.indexer.v1.IndexerService/WatchToolDefinitions",
		"switchboard.indexer.v1.IndexerService/AcquireRateTokens",
		"switchboard.indexer.v1.IndexerService/RecordAuditEvents",
		"switchboard.indexer.v1.ClusterStateService/CreateTask",
		"switchboard.indexer.v1.ClusterStateService/GetTask",
		"switchboard.indexer.v1.ClusterStateService/ListTasks",
		"switchboard.indexer.v1.ClusterStateService/AdvanceTask",
		"switchboard.indexer.v1.ClusterStateService/AnswerTask",
		"switchboard.indexer.v1.ClusterStateService/CancelTask",
		"switchboard.indexer.v1.ClusterStateService/RenewTaskLeases",
	}
	// IndexerMethods are the RPCs the indexer calls on the aggregator to
	// build search scopes: views, never calls.
	IndexerMethods = []string{
		"switchboard.aggregator.v1.AggregatorService/Discover",
		"switchboard.aggregator.v1.AggregatorService/ListTools",
		"switchboard.aggregator.v1.AggregatorService/WatchCatalog",
	}
)

// The indexer's cluster-state RPCs moved from IndexerService to
// ClusterStateService; for one release the indexer serves both names
// (docs/grpc-api.md, "Versions"), and an allow list that names either
// name of such an RPC (or either service with *) allows both, so that
// configurations, clients and indexers can be upgraded in any order.
const (
	indexerService      = "switchboard.indexer.v1.IndexerService"
	clusterStateService = "switchboard.indexer.v1.ClusterStateService"
)

// clusterStateRPCs are the RPCs ClusterStateService took over.
var clusterStateRPCs = map[string]bool{
	"RevokeSession": true, "CheckSession": true, "WatchRevocations": true, "ConsumeRequestState": true,
	"UpdateSessionState": true, "WatchSessionEvents": true, "RelayInputResponse": true, "RelayCancellation": true,
	"RecordToolDefinitions": true, "ApproveToolDefinition": true, "ListToolDefinitions": true, "WatchToolDefinitions": true,
	"AcquireRateTokens": true, "ListRateLimitBuckets": true, "RecordAuditEvents": true, "QueryAuditEvents": true,
}

// A held call's retry is forwarded to the replica holding it with
// ResumeHeldCall, or, streamed, with ResumeHeldCallStream: one right,
// which an allow list grants by naming either.
const (
	resumeHeldCall       = "/switchboard.aggregator.v1.AggregatorService/ResumeHeldCall"
	resumeHeldCallStream = "/switchboard.aggregator.v1.AggregatorService/ResumeHeldCallStream"
)

// Giving back a request state's use is part of the right to record uses:
// one right, which an allow list grants by naming either.
const (
	consumeRequestState = "/" + clusterStateService + "/ConsumeRequestState"
	releaseRequestState = "/" + clusterStateService + "/ReleaseRequestState"
)

// canonicalMethod is fullMethod ("/package.Service/Method") under its one
// name: a cluster-state RPC named through IndexerService is named through
// ClusterStateService, ResumeHeldCallStream is ResumeHeldCall and
// ReleaseRequestState is ConsumeRequestState.
func canonicalMethod(fullMethod string) string {
	if rest, ok := strings.CutPrefix(fullMethod, "/"+indexerService+"/"); ok && clusterStateRPCs[rest] {
		fullMethod = "/" + clusterStateService + "/" + rest
	}
	switch fullMethod {
	case resumeHeldCallStream:
		return resumeHeldCall
	case releaseRequestState:
		return consumeRequestState
	}
	return fullMethod
}

// MethodSet is the set of RPCs an allow list names.
type MethodSet struct {
	methods  map[string]bool // full method names, "/package.Service/Method"
	services map[string]bool // "package.Service" whose every method is in
}

// NewMethodSet reads allow patterns (see ParseMethodPattern); a malformed
// one (Validate refuses them) adds nothing.
func NewMethodSet(patterns []string) MethodSet {
	m := MethodSet{methods: map[string]bool{}, services: map[string]bool{}}
	for _, p := range patterns {
		service, method, err := ParseMethodPattern(p)
		switch {
		case err != nil:
		case method == "*":
			m.services[service] = true
			if service == indexerService {
				// Every method of IndexerService includes those it
				// served before they took their new name: those, not
				// every method of ClusterStateService (the tasks are
				// the aggregators' alone, and never were IndexerService's).
				for rpc := range clusterStateRPCs {
					m.methods["/"+clusterStateService+"/"+rpc] = true
				}
			}
		default:
			m.methods[canonicalMethod("/"+service+"/"+method)] = true
		}
	}
	return m
}

// Permits reports whether the set holds fullMethod, written as gRPC does
// ("/package.Service/Method").
func (m MethodSet) Permits(fullMethod string) bool {
	fullMethod = canonicalMethod(fullMethod)
	if m.methods[fullMethod] {
		return true
	}
	i := strings.LastIndexByte(fullMethod, '/')
	return i > 0 && m.services[fullMethod[1:i]]
}
