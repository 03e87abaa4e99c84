package backend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// A Legacy backend asks for the client's input (elicitation/create,
// sampling/createMessage, roots/list) with server-to-client requests in
// the middle of a call. A Modern client can only be asked through an
// input_required result and answers with a retry. CallToolAsking bridges
// the two: it runs the call on a backend session of its own that
// declares the client's capabilities, and when the backend asks, it holds
// the backend call open and returns input_required with a requestState
// naming the held call. ResumeHeld hands the retry's answer to the
// waiting backend request and carries on with the same call.
//
// Held calls live in this process. With Config.HeldOwner set, the state
// names this replica ("...@<owner>"), so that a retry reaching another
// replica is forwarded here (the server's peer forwarding); without it the
// retry must reach this replica itself. A held call whose retry does not
// come within Config.InputWait is cancelled at the backend and forgotten;
// a retry after that gets ErrHeldCallGone.

// HeldStatePrefix starts the requestState of a held call, which names the
// call, the round of input it answers and, optionally, the replica holding
// it ("switchboard-held:<id>.<round>[@<owner>]"): a state answers its own
// round once, never a later question of the same call.
const HeldStatePrefix = "switchboard-held:"

// ParseHeldState splits a held call's requestState into the call's id,
// the round and the owner replica's address ("" when it names none); ok
// is false for a state of any other shape.
func ParseHeldState(state string) (id, round, owner string, ok bool) {
	rest, found := strings.CutPrefix(state, HeldStatePrefix)
	if !found {
		return "", "", "", false
	}
	rest, owner, _ = strings.Cut(rest, "@")
	id, round, found = strings.Cut(rest, ".")
	if !found || id == "" || round == "" {
		return "", "", "", false
	}
	return id, round, owner, true
}

// heldState is the requestState of round of held call h.
func (c *Client) heldState(h *heldCall) string {
	state := HeldStatePrefix + h.id + "." + strconv.Itoa(h.round)
	if c.cfg.HeldOwner != "" {
		state += "@" + c.cfg.HeldOwner
	}
	return state
}

// ErrHeldCallGone: the requestState names a held call that has ended, was
// never here, or belongs to another caller.
var ErrHeldCallGone = errors.New("the held call is gone")

// ErrTooManyHeld: maxHeldCalls calls of this backend already wait for
// their clients' input; the new one was cancelled instead of held.
var ErrTooManyHeld = errors.New("too many calls wait for client input")

// maxHeldCalls bounds the held calls per backend (Client.maxHeld): each
// holds a backend session and a goroutine for up to InputWait.
const maxHeldCalls = config.MaxHeldCalls

// heldCall is a backend call waiting for, or working on, the client's input.
type heldCall struct {
	id    string
	owner string
	// asks carries the backend's requests for input, done the call's end.
	asks   chan *inputAsk
	done   chan heldOutcome
	cancel context.CancelFunc
	// pending is the question the client was asked and key its inputRequests key.
	pending *inputAsk
	key     string
	round   int
	timer   *time.Timer
	// reasked counts the times the pending question was asked again.
	reasked int
	// relay hands the backend's notifications to the caller of the round
	// in progress: the call's, then each retry's.
	relay relay
	// cred is the credential the call's requests carry (WithCaller, the
	// first round's), whichever round's caller awaits it.
	cred *callerCred

	// session is the held call's own session once open, and level the
	// log level it asked its backend for ("" none): a later round that
	// wants more asks for it (askLevel).
	sessionMu sync.Mutex
	session   *mcp.ClientSession
	level     mcp.LoggingLevel
}

// opened records the held call's session, which asked for level.
func (h *heldCall) opened(level mcp.LoggingLevel) func(*mcp.ClientSession) {
	return func(s *mcp.ClientSession) {
		h.sessionMu.Lock()
		h.session, h.level = s, level
		h.sessionMu.Unlock()
	}
}

// askLevel asks the held call's backend for log messages from level on
// when a round's caller wants more than the session asked for (the call
// began without a level, or a higher one): a retry then gets the
// messages it asks for, as the same call made plainly would. A backend
// that refuses keeps the level it had; the round goes on.
func (h *heldCall) askLevel(ctx context.Context, level mcp.LoggingLevel, log *slog.Logger) {
	h.sessionMu.Lock()
	defer h.sessionMu.Unlock()
	s := h.session
	if level == "" || s == nil || h.level != "" && LevelAtLeast(level, h.level) {
		return
	}
	if caps := s.InitializeResult().Capabilities; caps == nil || caps.Logging == nil {
		return
	}
	if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		log.Info("a held call's backend did not take the log level its retry asks for", "err", err)
		return
	}
	h.level = level
}

type inputAsk struct {
	method string
	params mcp.InputRequest
	answer chan json.RawMessage // nil: no answer
}

type heldOutcome struct {
	res *mcp.CallToolResult
	err error
}

// ask is called by the SDK's handlers on the held call's session: it hands
// the question to whoever awaits the call and waits for the answer.
func (h *heldCall) ask(ctx context.Context, method string, params mcp.InputRequest) (json.RawMessage, error) {
	q := &inputAsk{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	select {
	case h.asks <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case raw := <-q.answer:
		if raw == nil {
			return nil, fmt.Errorf("the client gave no answer to %s", method)
		}
		return raw, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func answer[T any](raw json.RawMessage, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("malformed input response: %w", err)
	}
	return v, nil
}

// CallToolAsking calls a tool so that the backend may ask the client for
// input, which only clients declaring caps can give. owner binds the held
// call to its caller: ResumeHeld accepts only the same owner. n is what
// this round's caller wants of the backend's notifications (as
// CallToolStreamed); the backend is asked for progress and log messages
// as n asks, once for the whole call, and each retry gets them as its own
// Notify asks.
func (c *Client) CallToolAsking(ctx context.Context, params *mcp.CallToolParams, caps *mcp.ClientCapabilities, owner string, n Notify) (*mcp.CallToolResult, error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	// The held session's requests carry a record of their own, which
	// its answer's failure ends (callerCred.abandon), with the call's
	// credential.
	cred := &callerCred{key: serviceKey}
	if caller := callerCredential(ctx); caller != nil {
		cred.authorization, cred.key = caller.authorization, caller.key
	}
	bctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), callerKey{}, cred))
	cred.abandon = cancel
	h := &heldCall{id: hex.EncodeToString(id), owner: owner, asks: make(chan *inputAsk), done: make(chan heldOutcome, 1), cancel: cancel, cred: cred}
	h.relay.redact = func(p any) any { return c.redactNotice(bctx, p) }
	h.relay.set(n)
	opts := &mcp.ClientOptions{
		Logger:         c.log,
		Capabilities:   caps,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	h.relay.handle(opts)
	if caps.Elicitation != nil {
		opts.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return answer[mcp.ElicitResult](h.ask(ctx, "elicitation/create", r.Params))
		}
	}
	if caps.Sampling != nil {
		// The handler with tools gets the request whole (its tools and
		// toolChoice, content of several blocks), and takes an answer of
		// several blocks: the plain one's request has them dropped.
		opts.CreateMessageWithToolsHandler = func(ctx context.Context, r *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			return answer[mcp.CreateMessageWithToolsResult](h.ask(ctx, "sampling/createMessage", r.Params))
		}
	}
	client := mcp.NewClient(Implementation, opts)
	var roots func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
	if caps.RootsV2 != nil {
		roots = func(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
			return answer[mcp.ListRootsResult](h.ask(ctx, "roots/list", p))
		}
	}
	serveRoots(client, roots)
	go func() {
		defer cancel()
		// Progress is always asked for, as a later round may want it
		// (the relay passes it on to the rounds that do); a log level is
		// asked for when a round wants one (askLevel), as each is a
		// request of its own.
		res, err := c.callOnOwnSession(bctx, client, params, true, n.Level, h.opened(n.Level))
		h.done <- heldOutcome{res: res, err: err}
	}()
	return c.await(ctx, h)
}

// ResumeHeld answers the held call named by state with the client's input
// responses (keyed as its inputRequests were) and carries the call on; n
// is what this retry's caller wants of the backend's notifications.
// Holds reports whether this client holds the call state names.
func (c *Client) Holds(state string) bool {
	id, _, replica, ok := ParseHeldState(state)
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	return ok && replica == c.cfg.HeldOwner && c.held[id] != nil
}

func (c *Client) ResumeHeld(ctx context.Context, state, owner string, responses map[string]json.RawMessage, n Notify) (*mcp.CallToolResult, error) {
	id, round, replica, ok := ParseHeldState(state)
	c.heldMu.Lock()
	h := c.held[id]
	if !ok || replica != c.cfg.HeldOwner || h == nil || h.owner != owner || round != strconv.Itoa(h.round) {
		c.heldMu.Unlock()
		return nil, ErrHeldCallGone
	}
	reply := responses[h.key]
	if !answers(h.pending.method, reply) && h.reasked < maxReasks {
		// The retry does not answer the question (no answer under its
		// key, or not one of the kind asked): the call stays held and
		// the question is asked again, in a round of its own, as a
		// server asks again for what is still missing, rather than
		// failing the backend's call on the client's slip. A few times:
		// a client that never answers does not hold the call for good.
		h.reasked++
		h.round++
		h.key = fmt.Sprintf("input-%d", h.round)
		h.timer.Stop()
		c.armExpiry(h)
		again := &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{h.key: h.pending.params}, RequestState: c.heldState(h)}
		c.heldMu.Unlock()
		return c.redactToolResult(context.WithValue(ctx, callerKey{}, h.cred), again)
	}
	c.unholdLocked(id)
	h.timer.Stop()
	c.heldMu.Unlock()
	h.askLevel(context.WithValue(ctx, callerKey{}, h.cred), n.Level, c.log)
	h.relay.set(n)
	h.pending.answer <- reply
	return c.await(ctx, h)
}

// ReleaseHeld ends the call state holds for owner's input, which will not
// come (its client cancelled, went away, or lacks the capability asked
// for), and cancels its backend call, rather than holding it until
// InputWait: context.Canceled once it is, ErrHeldCallGone when no such
// call is held.
func (c *Client) ReleaseHeld(state, owner string) error {
	id, round, replica, ok := ParseHeldState(state)
	c.heldMu.Lock()
	h := c.held[id]
	if !ok || replica != c.cfg.HeldOwner || h == nil || h.owner != owner || round != strconv.Itoa(h.round) {
		c.heldMu.Unlock()
		return ErrHeldCallGone
	}
	c.unholdLocked(id)
	h.timer.Stop()
	c.heldMu.Unlock()
	h.cancel()
	return context.Canceled
}

// answers reports whether reply is an answer of the kind method asks for:
// an elicitation's result with its action, a sampling request's message,
// a roots request's list.
func answers(method string, reply json.RawMessage) bool {
	if len(reply) == 0 {
		return false
	}
	switch method {
	case "elicitation/create":
		var r mcp.ElicitResult
		return json.Unmarshal(reply, &r) == nil && r.Action != ""
	case "sampling/createMessage":
		var r mcp.CreateMessageWithToolsResult
		return json.Unmarshal(reply, &r) == nil && len(r.Content) > 0
	case "roots/list":
		var r mcp.ListRootsResult
		return json.Unmarshal(reply, &r) == nil && r.Roots != nil
	}
	return json.Valid(reply)
}

// await waits, within the caller's request, for the held call to end or to
// ask for input. A question is returned as input_required and the call is
// held for InputWait; a caller that goes away cancels the backend call.
func (c *Client) await(ctx context.Context, h *heldCall) (*mcp.CallToolResult, error) {
	// This round's caller gets nothing once it has its answer.
	defer h.relay.set(Notify{})
	// What the backend sends back is read and redacted with the credential
	// the call's requests carried (a retry's own may be another token).
	ctx = context.WithValue(ctx, callerKey{}, h.cred)
	wait, cancel := context.WithTimeoutCause(ctx, c.budget(ctx), errBudget)
	defer cancel()
	select {
	case o := <-h.done:
		if o.err != nil {
			// Classified in the caller's context: the budget's own end is
			// a timeout, not the caller's deadline.
			return nil, c.classify(ctx, o.err)
		}
		return c.redactToolResult(wait, o.res)
	case q := <-h.asks:
		h.round++
		h.pending, h.key, h.reasked = q, fmt.Sprintf("input-%d", h.round), 0
		c.heldMu.Lock()
		if err := c.holdLocked(h); err != nil {
			c.heldMu.Unlock()
			h.cancel()
			return nil, err
		}
		c.armExpiry(h)
		c.heldMu.Unlock()
		// The backend's question goes to the client with its secrets cut
		// out; the backend gets the client's answer as it is.
		return c.redactToolResult(ctx, &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{h.key: q.params}, RequestState: c.heldState(h)})
	case <-wait.Done():
		h.cancel()
		err := wait.Err()
		if errors.Is(context.Cause(wait), errBudget) {
			err = fmt.Errorf("%w: %w", errBudget, err)
		}
		return nil, c.classify(ctx, err)
	}
}

// maxReasks bounds how often one question of a held call is asked again
// for retries that do not answer it.
const maxReasks = 3

// armExpiry ends h's current round after InputWait unless a retry comes.
// Call with heldMu held.
func (c *Client) armExpiry(h *heldCall) {
	round := h.round
	h.timer = time.AfterFunc(c.cfg.InputWait, func() { c.expire(h.id, round) })
}

// expire cancels a held call whose retry of round did not come in time;
// a round asked again since has a timer of its own.
func (c *Client) expire(id string, round int) {
	c.heldMu.Lock()
	var h *heldCall
	if held := c.held[id]; held != nil && held.round == round {
		h = c.unholdLocked(id)
	}
	c.heldMu.Unlock()
	if h != nil {
		c.log.Info("held call cancelled: the client's input did not come in time", "wait", c.cfg.InputWait)
		h.cancel()
	}
}

// holdLocked holds h for its client's input, within the backend's bound
// (maxHeld) and its principal's share (Config.HeldPerPrincipal), so that
// one principal cannot fill the backend's held calls and fail every other
// principal's elicitation or sampling. Call with heldMu held.
func (c *Client) holdLocked(h *heldCall) error {
	if len(c.held) >= c.maxHeld {
		return ErrTooManyHeld
	}
	p := heldPrincipal(h.owner)
	if share := c.cfg.HeldPerPrincipal; share > 0 && c.heldBy[p] >= share {
		return fmt.Errorf("%w: this principal's share (%d) is taken", ErrTooManyHeld, share)
	}
	c.held[h.id] = h
	c.heldBy[p]++
	return nil
}

// unholdLocked ends the holding of the call id, if it is held, and
// returns it. Call with heldMu held.
func (c *Client) unholdLocked(id string) *heldCall {
	h := c.held[id]
	if h == nil {
		return nil
	}
	delete(c.held, id)
	p := heldPrincipal(h.owner)
	if c.heldBy[p]--; c.heldBy[p] <= 0 {
		delete(c.heldBy, p)
	}
	return h
}

// heldPrincipal is the principal part of a held call's owner
// ("<subject>\x00<server>\x00<tool>", route.go): the key of its share.
func heldPrincipal(owner string) string {
	p, _, _ := strings.Cut(owner, "\x00")
	return p
}

// InputWait is how long a held call waits for its client's input.
func (c *Client) InputWait() time.Duration { return c.cfg.InputWait }

// heldCalls is how many calls wait for the client's input.
func (c *Client) heldCalls() int {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	return len(c.held)
}

// IsLegacy reports whether the current session to the backend speaks a
// Legacy protocol (nil session: unknown, false).
func (c *Client) IsLegacy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != nil && c.session.InitializeResult().ProtocolVersion < ProtocolModern
}
