package backend

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Protocol versions a backend may be pinned to (config.Backend.Protocol).
const (
	ProtocolAuto   = config.ProtocolAuto
	ProtocolModern = config.ProtocolModern
	ProtocolLegacy = config.ProtocolLegacy
)

// Config describes one backend: config.Backend as the engine translates
// it, with its defaults and validated (config.Aggregator.WithDefaults,
// config.ValidateAggregator). New takes it as it is.
type Config struct {
	Name string
	URL  string
	// URLFromEnvironment are the values the environment wrote into URL
	// (config.Backend.URLFromEnvironment). Those in its path, a key
	// there, are secrets (pathSecrets), which nothing else in a URL
	// marks: every text the redactor cleans loses them, as it loses the
	// URL's query.
	URLFromEnvironment []string
	// Protocol is ProtocolAuto, ProtocolModern or ProtocolLegacy.
	Protocol string
	// Headers are added to every request. Their values are secrets: they
	// never appear in logs or errors.
	Headers map[string]string
	// Auth adds per-caller or OAuth credentials to the static headers
	// (callercred.go, oauth.go); the zero value: static headers only.
	Auth Auth
	// Hidden are the strings the tool overrides' hidden arguments inject
	// into this backend's calls (every string inside each value, sorted,
	// without repeats; nil for none). They may be secrets: the redactor
	// cuts those of at least MinRedactedHidden bytes out of what the
	// backend sends back (redact.go).
	Hidden []string
	// Timeout bounds every request to the backend.
	Timeout time.Duration
	// InputWait bounds how long a held call waits for the client's input
	// (see CallToolAsking).
	InputWait time.Duration
	// HeldPerPrincipal bounds the held calls of one principal (0: no
	// share of its own, only the backend's bound).
	HeldPerPrincipal int
	// HeldOwner is the address of this aggregator replica that a held
	// call's requestState names, so that a retry reaching another replica
	// can be forwarded here; empty names none.
	HeldOwner string
	// Command, Env and Dir make a stdio backend: the client runs the
	// command behind a loopback bridge (aggregator/internal/stdio) and
	// reaches it there, URL and Headers being the bridge's.
	Command []string
	Env     map[string]string
	Dir     string
}

// Errors a backend operation fails with. Callers branch with errors.Is.
var (
	// ErrTimeout: the backend did not answer within its timeout.
	ErrTimeout = errors.New("backend timed out")
	// ErrUnavailable: the backend could not be reached or its session broke.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrMalformedRequest: the backend refused a call as malformed (HTTP 400
	// without a JSON-RPC error), for example arguments nested deeper than
	// its JSON decoder accepts. The caller sent it; the backend is fine.
	ErrMalformedRequest = errors.New("backend rejected the request as malformed")
)

// ProtocolError is a JSON-RPC error the backend answered with.
type ProtocolError struct {
	Code    int64
	Message string
	// Data is the error's data as JSON text; empty if none.
	Data string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("backend error %d: %s", e.Code, e.Message)
}
