package store

import (
	"context"
	"errors"
	"time"
)

// SessionStates keeps what Legacy gateway sessions set after they were
// created (log level, resource subscriptions) and relays client answers to
// input requests between gateway replicas: a sealed session id cannot carry
// either, and every gateway replica must see them.
type SessionStates interface {
	// UpdateSessionState applies change atomically, within limits, and
	// returns the session's state after it. A change that would pass a
	// bound is a *SessionStateBoundError and changes nothing; a session
	// revoked or expired is ErrSessionGone.
	UpdateSessionState(ctx context.Context, change SessionStateChange, limits SessionStateLimits) (SessionState, error)
	// SessionStates lists every state whose session has not expired.
	SessionStates(ctx context.Context) ([]SessionState, error)
	// SessionStateOf returns one session's state; found is false if it
	// has none (or it expired).
	SessionStateOf(ctx context.Context, digest string) (st SessionState, found bool, err error)
	// RelayInputResponse records an answer for its owner until expiresAt
	// and returns its id; a second answer to the same request of the same
	// session is ErrAlreadyAnswered, one past limits ErrRelaysFull.
	RelayInputResponse(ctx context.Context, r InputResponse, limits RelayLimits) (int64, error)
	// InputResponse returns a recorded answer by id; found is false once
	// it expired.
	InputResponse(ctx context.Context, id int64) (r InputResponse, found bool, err error)
	// InputResponseIDs lists the ids of the live answers for owner (any
	// owner when it is empty) above afterID, in order, at most limit.
	InputResponseIDs(ctx context.Context, owner string, afterID int64, limit int) ([]int64, error)
	// RelayCancellation announces a client's cancellation to every
	// listener on the backing store (ListenSessionEvents), itself
	// included. Nothing is recorded: a listener that is not following
	// when it is announced never hears of it.
	RelayCancellation(ctx context.Context, c Cancellation) error
	// ListenSessionEvents follows changes of session states, new relayed
	// answers and relayed cancellations announced through any handle on
	// the same backing store until ctx ends or the connection fails; it
	// always returns an error. It calls listening once it is following,
	// then stateChanged with the digest of each session whose state
	// changed (or went), answered with the id of each new answer, and
	// cancelled with each cancellation. Callers must not block.
	ListenSessionEvents(ctx context.Context, listening func(), stateChanged func(digest string), answered func(id int64), cancelled func(Cancellation)) error
}

// Cancellation is a client's notifications/cancelled for one of its
// session's requests, which may run on any gateway replica.
type Cancellation struct {
	SessionDigest string
	// RequestID is the JSON-RPC id of the request, as JSON text.
	RequestID string
}

// SessionStateChange is one change of a session's state: exactly one of
// LogLevel, Subscribe and Unsubscribe is set.
type SessionStateChange struct {
	Digest, Principal string
	ExpiresAt         time.Time
	LogLevel          string
	Subscribe         string
	Unsubscribe       string
}

// SessionStateLimits bound a session's state, and a principal's, as the
// gateway does (gateway.sessions).
type SessionStateLimits struct {
	Subscriptions  int
	URIBytes       int
	PerPrincipal   int
	PrincipalBytes int64
}

// SessionState is what a session set.
type SessionState struct {
	Digest, Principal string
	LogLevel          string
	URIs              []string
	ExpiresAt         time.Time
	Version           uint64
}

// What state costs besides its own bytes, as the gateway counts it, so that
// the bounds mean the same in both.
const (
	SessionStateOverhead = 384
	URIOverhead          = 32
)

// Holds reports whether the session holds any state: a subscription or a
// log level. One that holds none counts against no bound.
func (s SessionState) Holds() bool { return len(s.URIs) > 0 || s.LogLevel != "" }

// Charge is what the state counts against the bytes bounds (a
// principal's, every session's): its Cost while it holds any state,
// nothing once it holds none, as on the gateways. A session that
// unsubscribed from everything is charged its whole Cost again, the
// overhead included, when it takes state again.
func (s SessionState) Charge() int64 {
	if !s.Holds() {
		return 0
	}
	return s.Cost()
}

// Cost is the state's size as it is held and sent: its bytes and
// overheads.
func (s SessionState) Cost() int64 {
	n := int64(SessionStateOverhead + len(s.LogLevel))
	for _, u := range s.URIs {
		n += int64(len(u) + URIOverhead)
	}
	return n
}

// InputResponse is a client's answer to an input request, for the gateway
// replica that sent the request.
type InputResponse struct {
	Owner         string
	SessionDigest string
	RequestID     string
	Response      string
	ExpiresAt     time.Time
}

// ErrSessionGone: the session was deleted or expired; it gets no state.
var ErrSessionGone = errors.New("session deleted or expired")

// RelayLimits bound the live relayed answers of one session, across
// replicas: how many, and their bytes.
type RelayLimits struct {
	PerSession   int
	SessionBytes int64
}

// ErrRelaysFull: the session holds as many relayed answers as it may.
var ErrRelaysFull = errors.New("the session holds as many relayed input responses as it may")

// ErrAlreadyAnswered: the input request has an answer already.
var ErrAlreadyAnswered = errors.New("input request already answered")

// SessionStateBoundError is a change past a bound. URI says the bound is on
// one URI's length (the request is invalid), Subscriptions that it is on
// one session's subscriptions; otherwise it is on what the principal's
// sessions hold.
type SessionStateBoundError struct {
	Msg           string
	URI           bool
	Subscriptions bool
}

func (e *SessionStateBoundError) Error() string { return e.Msg }
