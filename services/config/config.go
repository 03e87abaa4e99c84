// Package config loads the one YAML file that describes a whole Switchboard
// deployment. Every binary reads the same file and uses its own section, so
// a deployment has a single source of truth (in Kubernetes, one ConfigMap).
//
// Secrets never live in the file: a value may reference an environment
// variable as ${NAME} (or ${NAME:-default}), which is expanded before the
// YAML is parsed. A reference to an unset variable without a default is an
// error, so a missing secret fails at start instead of running with an empty
// key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole deployment.
type Config struct {
	// ServiceAuth holds the credentials services use to authenticate each
	// other on gRPC.
	ServiceAuth ServiceAuth `yaml:"serviceAuth"`
	Telemetry   Telemetry   `yaml:"telemetry"`
	Logging     Logging     `yaml:"logging"`
	Ops         Ops         `yaml:"ops"`
	Gateway     Gateway     `yaml:"gateway"`
	Aggregator  Aggregator  `yaml:"aggregator"`
	Indexer     Indexer     `yaml:"indexer"`
	// Servers are the virtual MCP servers (servers.go), read by the
	// gateway (routes, optimizer) and the aggregator (views).
	Servers []Server `yaml:"servers"`
	// RateLimits are token buckets the aggregators and indexers apply,
	// shared through the indexer's PostgreSQL (ratelimit.go).
	RateLimits RateLimits `yaml:"rateLimits"`
	// Dev configures switchboard-dev (the local runner); services ignore it.
	Dev Dev `yaml:"dev"`

	// GRPC tunes the connections between the services (grpc.go).
	GRPC GRPC `yaml:"grpc"`

	// Reload configures how a running service notices a change of this
	// file (reload.go).
	Reload Reload `yaml:"reload"`

	// Audit configures the audit trail every service writes (audit.go).
	Audit Audit `yaml:"audit"`

	// sources says where each value of the file came from (its line, the
	// variables it was expanded from), for errors about keys (keyerr.go).
	sources sources
}

// ServiceAuth lists who may call the gRPC services.
type ServiceAuth struct {
	// Credentials are the callers the gRPC services accept.
	Credentials []ServiceCredential `yaml:"credentials"`
	// TLS, when set, serves gRPC over TLS; with ClientCAFile it requires and
	// verifies a client certificate on every connection (mTLS), and a
	// verified certificate whose subject alternative name (URI or DNS) or
	// common name is a credential's authenticates as that credential
	// without a token.
	TLS TLS `yaml:"tls"`
}

// ServiceCredential is one caller identity for the gRPC services.
type ServiceCredential struct {
	// Name identifies the caller in logs and metrics ("gateway", "indexer").
	Name string `yaml:"name"`
	// Token is the bearer token; use ${ENV} so it stays out of the file.
	Token string `yaml:"token,omitempty"`
	// TokenSHA256 is the bearer token's SHA-256 as 64 hexadecimal digits,
	// instead of Token: a server that only verifies a caller's token need
	// not hold the token itself. One of Token and TokenSHA256.
	TokenSHA256 string `yaml:"tokenSHA256,omitempty"`
	// HostedBy names the credential whose verified client certificate may
	// carry this credential's token: a client that runs in another
	// service's pods and presents that service's certificate (the
	// operator console in the gateway's). Otherwise a call whose token and
	// certificate name different credentials is refused.
	HostedBy string `yaml:"hostedBy,omitempty"`
	// URISAN, DNSSAN and CommonName authenticate this credential by a
	// verified mTLS client certificate: a URI subject alternative name
	// (spiffe://...), a DNS one, or the subject's common name. A
	// certificate's SANs are looked at first (URI, then DNS); its common
	// name only when no SAN names a credential.
	URISAN     string `yaml:"uriSAN,omitempty"`
	DNSSAN     string `yaml:"dnsSAN,omitempty"`
	CommonName string `yaml:"commonName,omitempty"`
	// Role names what the credential is (gateway, indexer, aggregator,
	// console, client; roles.go): it grants the role's RPCs and flags, in
	// place of Allow.
	Role string `yaml:"role,omitempty"`
	// Allow names the RPCs the credential may call: full gRPC method names
	// ("switchboard.aggregator.v1.AggregatorService/ListTools") or every
	// method of a service ("switchboard.indexer.v1.IndexerService/*").
	// Required; any other call is PERMISSION_DENIED. Health checking and
	// reflection need no credential.
	Allow []string `yaml:"allow,omitempty"`
	// Operator marks a credential of the people who run the deployment:
	// operator callers see backend error texts and URLs in ListBackends,
	// which every other caller sees only as a generic class, are not
	// held to the per-caller bound on RevokeSession, and may ask Search to
	// explain its ranking (SearchRequest.explain), a search charged to no
	// principal's find_tool limit.
	Operator bool `yaml:"operator,omitempty"`
	// AssertPrincipals marks a trusted service (the gateway, the indexer)
	// that may act for any end user named in a request. Other callers act as
	// the principal below, whatever their requests say.
	AssertPrincipals bool `yaml:"assertPrincipals,omitempty"`
	// Subject and Groups are the identity of a caller that may not assert
	// principals (an internal client acting for itself).
	Subject string   `yaml:"subject,omitempty"`
	Groups  []string `yaml:"groups,omitempty"`
	// AuditService is the service whose audit events the credential may
	// ship to the indexer (RecordAuditEvents): one of AuditServices. The
	// indexer stores an event only when its service is this one and its
	// kind one that service records. Unset: the credential's name when it
	// is one of AuditServices (the gateway's credential is named gateway,
	// the aggregators' aggregator), otherwise none, and the credential may
	// write no event (EffectiveAuditService).
	AuditService string `yaml:"auditService,omitempty"`
}

// TLS configures transport security for gRPC, as server and as client.
type TLS struct {
	CertFile     string `yaml:"certFile"`
	KeyFile      string `yaml:"keyFile"`
	CAFile       string `yaml:"caFile"`       // verifies servers (client side)
	ClientCAFile string `yaml:"clientCAFile"` // verifies clients (server side)
	ServerName   string `yaml:"serverName"`   // overrides the name checked in server certificates
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.CAFile != "" }

// Telemetry configures OpenTelemetry.
type Telemetry struct {
	// OTLPEndpoint is a host:port of an OTLP/gRPC collector. Empty disables
	// export (spans are still propagated, not recorded).
	OTLPEndpoint string `yaml:"otlpEndpoint"`
	// OTLPInsecure sends OTLP without TLS (a local collector).
	OTLPInsecure bool `yaml:"otlpInsecure"`
	// SampleRatio is the head sampling ratio for new traces (parent-based).
	SampleRatio *float64 `yaml:"sampleRatio"`
}

// Logging configures slog.
type Logging struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // json or text
}

// Ops configures what every service serves on its ops port
// (gateway.opsListen, aggregator.httpListen, indexer.httpListen) besides
// /healthz, /readyz and /metrics, and its garbage collector.
type Ops struct {
	// Pprof serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/ on the ops port. Off by default: a profile shows what
	// the process is doing, and recording one costs CPU. Never served on
	// the MCP or gRPC ports.
	Pprof bool `yaml:"pprof"`
	// Hosts are the names (besides IP literals and localhost) a request
	// to an ops port may give in its Host header: the names operators
	// reach the ops ports by. Any other name is refused, so that a page
	// whose name was rebound to the port's address (DNS rebinding, as
	// behind kubectl port-forward) cannot read metrics, profiles or the
	// console.
	Hosts []string `yaml:"hosts"`
	// HeapFloorMiB is the heap goal each service's garbage collector
	// keeps at least (services/heapfloor); nil is DefaultHeapFloorMiB, 0
	// leaves Go's own pacing. GOGC in the environment overrides it.
	HeapFloorMiB *int `yaml:"heapFloorMiB"`
}

// MaxOpsHosts bounds ops.hosts.
const MaxOpsHosts = 64

// DefaultHeapFloorMiB is ops.heapFloorMiB's default, and MaxHeapFloorMiB
// its bound.
const (
	DefaultHeapFloorMiB = 64
	MaxHeapFloorMiB     = 64 << 10
)

// HeapFloorBytes is ops.heapFloorMiB in bytes, its default when unset.
func (o Ops) HeapFloorBytes() uint64 {
	mib := DefaultHeapFloorMiB
	if o.HeapFloorMiB != nil {
		mib = *o.HeapFloorMiB
	}
	return uint64(mib) << 20
}

// Validate checks the ops section: each host a DNS name.
func (o Ops) Validate() error {
	if len(o.Hosts) > MaxOpsHosts {
		return fmt.Errorf("ops.hosts: at most %d names", MaxOpsHosts)
	}
	if f := o.HeapFloorMiB; f != nil && (*f < 0 || *f > MaxHeapFloorMiB) {
		return keyErr("ops.heapFloorMiB", "from 0 (Go's own pacing) to %d", MaxHeapFloorMiB)
	}
	for i, h := range o.Hosts {
		if !validHostName(h) {
			return keyErr(fmt.Sprintf("ops.hosts[%d]", i), "not a host name (letters, digits, '-' and '.', at most 253 bytes)")
		}
	}
	return nil
}

// validHostName reports whether h is a DNS host name.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Endpoint is how a service reaches another service over gRPC.
type Endpoint struct {
	// Address is host:port, which connects to one address of the name at
	// a time, or dns:///host:port, which spreads the calls over every
	// address the name resolves to that reports SERVING on gRPC health
	// (a headless Kubernetes Service: one address per ready pod).
	Address string `yaml:"address"`
	// Token is the credential presented to that service (${ENV}).
	Token string `yaml:"token"`
}

// Duration is a time.Duration written as "30s", "2m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		// time.ParseDuration's error quotes the value, which may be an
		// expanded secret: a TypeError, which Parse names by its key.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, notADuration)}}
	}
	if v < 0 {
		// Taken as unset (Or), it silently became the default.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, negativeDuration)}}
	}
	*d = Duration(v)
	return nil
}

// notADuration is what Duration says of a value that is not one, and
// negativeDuration of one below zero.
const (
	notADuration     = "not a duration (a number and a unit: 300ms, 30s, 2m, 1h)"
	negativeDuration = "a negative duration: give one of 0 or more (0, or none, takes the default)"
)

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Or returns the duration, or def when unset.
func (d Duration) Or(def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return time.Duration(d)
}

// Load reads, expands and parses a configuration file.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(raw, os.LookupEnv)
}

// Parse expands ${VAR} references with lookup and decodes the YAML
// strictly: unknown keys are errors, so a typo never silently disables a
// setting.
//
// References are expanded in scalar values only, after the YAML is parsed:
// a reference in a comment is never expanded (so a commented-out secret
// cannot stop a service), and a secret containing YAML syntax ("#", ": ")
// stays one value instead of changing the document's structure. What an
// expanded value is, the field it lands in decides (expandtypes.go): text
// in a string or any-typed field, that field's type in a number, bool or
// duration field.
//
// Its errors name keys, lines and variables, never a value (keyerr.go);
// the configuration it returns remembers where each value came from, for
// the errors of its validation (Annotate).
func Parse(raw []byte, lookup func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	docs := yaml.NewDecoder(bytes.NewReader(raw))
	if err := docs.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		// The file as written: no value in it was expanded yet.
		return nil, fmt.Errorf("parse config: %w", err)
	}
	// A second document (after a "---" line) would be dropped whole, the
	// keys in it silently unset: a policy file among them leaves every
	// caller allowed.
	var next yaml.Node
	if err := docs.Decode(&next); err == nil && next.Kind != 0 {
		line := next.Line
		if len(next.Content) > 0 {
			line = next.Content[0].Line
		}
		return nil, fmt.Errorf("parse config: a second YAML document (after a \"---\" line) starts at line %d, and would be ignored: keep one document", line)
	} else if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	var c Config
	if doc.Kind == 0 {
		// An empty file is an empty configuration, with the defaults of
		// one.
		c.applyLocalDefaults()
		return &c, nil
	}
	written := map[*yaml.Node]node{}
	src := sources{}
	// fromEnv are the values the environment gave the file's variables
	// (not their defaults, which the file holds), for the parts of a
	// backend's URL that are secrets (Backend.URLFromEnvironment).
	var fromEnv []string
	text := textScalars(&doc)
	var refused []error
	walkPaths(&doc, "", func(n *yaml.Node, path string, key bool) {
		info := node{path: path, key: key, src: valueSource{line: n.Line}}
		switch n.Kind {
		case yaml.MappingNode, yaml.SequenceNode:
			// In block style every key and value of the re-encoded
			// document starts a line of its own, so a decoding error's
			// line names one node.
			n.Style &^= yaml.FlowStyle
		case yaml.ScalarNode:
			info.src.vars = references(n.Value)
			for _, name := range info.src.vars {
				if v, ok := lookup(name); ok && v != "" {
					fromEnv = append(fromEnv, v)
				}
			}
			v, err := Expand(n.Value, lookup)
			if err != nil {
				refused = append(refused, &KeyError{Key: path, Line: n.Line, Err: err})
			} else if v != n.Value {
				n.Value = v
				switch {
				case n.Style&yaml.TaggedStyle != 0:
					// An explicit tag (!!int ${N}) is kept. A
					// value that does not fit it is refused here,
					// by its key: yaml's own error would quote
					// the value and name no key.
					var decoded any
					if n.Decode(&decoded) != nil {
						refused = append(refused, &KeyError{Key: path, Line: n.Line, Vars: info.src.vars,
							Err: fmt.Errorf("does not read as its explicit tag %s", n.ShortTag())})
					}
				case text[n] && (v != "" || n.Style&quotedStyles != 0):
					// A text field gets the text, whatever YAML
					// would make of it (expandtypes.go).
					n.Tag = "!!str"
				default:
					// A number, bool or duration: "${PORT}" (a
					// string as written) loses its resolved tag and
					// is read as the field's type once re-encoded.
					// So does an unquoted reference that expands to
					// nothing: an empty value, as if none was
					// written.
					n.Tag, n.Style = "", 0
				}
			}
			if !key {
				src[path] = info.src
			}
		}
		written[n] = info
	})
	if len(refused) > 0 {
		return nil, errors.Join(refused...)
	}
	// Re-encode and decode strictly: yaml.Node.Decode has no strict mode.
	expanded, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse config: %w", decodeErrors(err, &doc, expanded, written, src))
	}
	c.sources = src
	if err := negativeCounts(reflect.ValueOf(&c), ""); err != nil {
		return nil, c.Annotate(err)
	}
	c.Aggregator.recordURLsFromEnvironment(fromEnv)
	if err := c.ServiceAuth.applyRoles(); err != nil {
		return nil, c.Annotate(err)
	}
	c.applyLocalDefaults()
	return &c, nil
}

var refPattern = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// Expand replaces ${NAME} and ${NAME:-default}. "$$" is a literal "$". Only
// the braced form is recognised, so a bare "$" in a value (a regexp, a
// password) is left alone.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	const dollarEscape = "\x00DOLLAR\x00"
	s = strings.ReplaceAll(s, "$$", dollarEscape)
	out := refPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := refPattern.FindStringSubmatch(m)
		if v, ok := lookup(sub[1]); ok {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("config references unset environment variables: %s", strings.Join(missing, ", "))
	}
	return strings.ReplaceAll(out, dollarEscape, "$"), nil
}
