package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/listing"
)

// mirrored is what the bridge's server lists of the process.
type mirrored struct {
	tools, resources, templates, prompts []string
}

// listTimeout bounds one resync's listings. A variable, so that a test of
// a process that never answers one need not wait for three.
var listTimeout = 30 * time.Second

// firstListing mirrors a process that has just started, trying again with
// back-off while its listing fails (a server still warming up, one slow
// to list the first time) until it succeeds (listed) or the process ends: until
// then the bridge answers as a backend that is down. A process whose
// listings time out maxMissedPings times in a row is taken for hung and
// killed, to be started again: until its first listing the bridge answers
// every request 503, pings too, so passPing never sees it.
func (b *Bridge) firstListing(ended <-chan struct{}, kill func()) (listed bool) {
	wait := minBackoff
	timeouts := 0
	for {
		err := b.resync()
		if err == nil {
			return true
		}
		if errors.Is(err, context.DeadlineExceeded) {
			timeouts++
		} else {
			timeouts = 0
		}
		if timeouts >= maxMissedPings {
			b.log.Warn("the stdio server answers no listing; killing it to start it again", "timeouts", timeouts)
			kill()
		} else {
			b.log.Warn("listing the stdio server failed; trying again", "err", b.redacted(err), "in", wait)
		}
		select {
		case <-time.After(wait):
		case <-ended:
			return false
		}
		wait = min(2*wait, maxBackoff)
	}
}

// listChanged asks for the process's listing to be mirrored again, on its
// list_changed. A burst of them costs one resync running and one pending,
// as an HTTP backend's costs one listing running and one more
// (engine.requestList): every resync lists everything.
func (b *Bridge) listChanged() {
	select {
	case b.relist <- struct{}{}:
	default:
	}
}

// relister resyncs whenever listChanged asks, until ctx ends; a listing
// that fails keeps the mirror as it was.
func (b *Bridge) relister(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.relist:
		}
		if err := b.resync(); err != nil {
			b.log.Warn("listing the stdio server again failed; its last listing stays", "err", b.redacted(err))
		}
	}
}

// resync lists everything the process offers and makes the server list
// exactly that, each item forwarding to the process. Resyncs run one at a
// time, listing included, so an older listing never replaces a newer one.
// A listing that fails changes nothing and is reported.
func (b *Bridge) resync() error {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	cs := b.current()
	if cs == nil {
		return ErrNotRunning
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	tools, err := list(ctx, "tools", func(ctx context.Context, cursor string) ([]*mcp.Tool, string, error) {
		r, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.Tools, r.NextCursor, nil
	})
	if err != nil {
		return err
	}
	var resources []*mcp.Resource
	var templates []*mcp.ResourceTemplate
	var prompts []*mcp.Prompt
	caps := cs.InitializeResult().Capabilities
	if caps != nil && caps.Resources != nil {
		resources, err = list(ctx, "resources", func(ctx context.Context, cursor string) ([]*mcp.Resource, string, error) {
			r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		})
		if err != nil {
			return err
		}
		templates, err = list(ctx, "resource templates", func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		})
		// Resources without templates, as many servers have.
		if wire := (*jsonrpc.Error)(nil); errors.As(err, &wire) && wire.Code == jsonrpc.CodeMethodNotFound {
			templates, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	if caps != nil && caps.Prompts != nil {
		prompts, err = list(ctx, "prompts", func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
			r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		})
		if err != nil {
			return err
		}
	}

	// Every item of the listing is added (go-sdk replaces one of the same
	// name or URI) before those that are gone are removed: a call of a
	// tool the process had all along never meets a server without it.
	var next mirrored
	for _, t := range tools {
		if !objectSchema(t.InputSchema) {
			// go-sdk's server takes only object schemas, as MCP asks.
			b.log.Warn("a tool of the stdio server has an input schema that is not an object; not listed", "tool", b.redacted(t.Name))
			continue
		}
		if b.mirror("tool", t.Name, func() { b.server.AddTool(t, b.callTool) }) {
			next.tools = append(next.tools, t.Name)
		}
	}
	for _, r := range resources {
		if b.mirror("resource", r.URI, func() { b.server.AddResource(r, b.readResource) }) {
			next.resources = append(next.resources, r.URI)
		}
	}
	for _, t := range templates {
		if b.mirror("resource template", t.URITemplate, func() { b.server.AddResourceTemplate(t, b.readResource) }) {
			next.templates = append(next.templates, t.URITemplate)
		}
	}
	for _, p := range prompts {
		if b.mirror("prompt", p.Name, func() { b.server.AddPrompt(p, b.getPrompt) }) {
			next.prompts = append(next.prompts, p.Name)
		}
	}
	prev := b.mirrored
	b.server.RemoveTools(gone(prev.tools, next.tools)...)
	b.server.RemoveResources(gone(prev.resources, next.resources)...)
	b.server.RemoveResourceTemplates(gone(prev.templates, next.templates)...)
	b.server.RemovePrompts(gone(prev.prompts, next.prompts)...)
	b.mirrored = next
	b.mu.Lock()
	// The process may have exited meanwhile: ready only while it runs.
	b.setReadyLocked(b.session == cs)
	b.mu.Unlock()
	return nil
}

// list follows the cursors of one of the process's lists (kind), within
// the bounds of every backend's listing (listing.Collect): a server that
// pages for ever, or through huge items, fails its listing rather than
// having the aggregator hold its pages until listTimeout.
func list[T any](ctx context.Context, kind string, page func(context.Context, string) ([]T, string, error)) ([]T, error) {
	items, err := listing.Collect(ctx, kind, func(ctx context.Context, cursor string) ([]T, string, int, error) {
		items, next, err := page(ctx, cursor)
		raw, _ := json.Marshal(items)
		return items, next, len(raw), err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the stdio server's %s: %w", kind, err)
	}
	return items, nil
}

// mirror adds one item of the process's listing to the bridge's server
// with add, and reports whether it could. go-sdk's Add functions panic on
// an item they cannot serve (a URI that does not parse, a URI template
// that is not one, a schema or parameter-header annotation they reject):
// a process's listing is input, so such an item is logged and left out,
// not a crash of the aggregator.
func (b *Bridge) mirror(kind, name string, add func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Warn("an item of the stdio server's listing cannot be served; not listed", "kind", kind, "name", b.redacted(name), "why", b.redacted(r))
			ok = false
		}
	}()
	add()
	return true
}

// gone are the names of prev that next does not hold.
func gone(prev, next []string) []string {
	kept := make(map[string]bool, len(next))
	for _, name := range next {
		kept[name] = true
	}
	var out []string
	for _, name := range prev {
		if !kept[name] {
			out = append(out, name)
		}
	}
	return out
}

// objectSchema reports whether a tool's input schema is a JSON object of
// type "object".
func objectSchema(schema any) bool {
	raw, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m["type"] == "object"
}

func (b *Bridge) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cs := b.current()
	if cs == nil {
		return nil, ErrNotRunning
	}
	// The call's _meta (its trace context among it) goes to the process.
	params := &mcp.CallToolParams{Meta: maps.Clone(req.Params.Meta), Name: req.Params.Name, Arguments: req.Params.Arguments}
	if token := req.Params.GetProgressToken(); token != nil {
		// The process's progress is relayed to this request under the
		// caller's token; the process gets one of the bridge's, unique
		// among the calls it runs, whatever the callers chose.
		own, done := b.progress.add(ctx, req.Session, token)
		defer done()
		params.SetProgressToken(own)
	}
	return served(cs.CallTool(ctx, params))
}

// ErrExited answers a request whose process exited before it answered.
var ErrExited = errors.New("the stdio server exited before it answered; it is being started again")

// served is the process's answer to a request, or its error; a process
// that exited meanwhile is named as such (go-sdk reports only the end of
// its stdout: "EOF"). Why it exited is the operator's to read in the log
// (supervise), not the caller's.
func served[T any](res T, err error) (T, error) {
	if errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		var none T
		return none, ErrExited
	}
	return res, err
}

// progressRelay maps the progress tokens the bridge gave the process's
// calls to the requests they came with.
type progressRelay struct {
	mu    sync.Mutex
	next  int64
	calls map[string]progressCall
}

type progressCall struct {
	// ctx is the call's: a notification sent under it goes on the call's
	// own response stream.
	ctx     context.Context
	session *mcp.ServerSession
	token   any
}

// add records a call's session and token, and returns the token the
// process gets for it and what forgets it.
func (r *progressRelay) add(ctx context.Context, session *mcp.ServerSession, token any) (string, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	own := "bridge-" + strconv.FormatInt(r.next, 10)
	if r.calls == nil {
		r.calls = map[string]progressCall{}
	}
	r.calls[own] = progressCall{ctx: ctx, session: session, token: token}
	return own, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.calls, own)
	}
}

// relay sends a progress notification of the process to the request its
// token names, under the caller's token; one naming no call in flight is
// dropped.
func (r *progressRelay) relay(p *mcp.ProgressNotificationParams) {
	own, _ := p.ProgressToken.(string)
	r.mu.Lock()
	call, ok := r.calls[own]
	r.mu.Unlock()
	if !ok || call.session == nil {
		return
	}
	relayed := *p
	relayed.ProgressToken = call.token
	_ = call.session.NotifyProgress(call.ctx, &relayed)
}

func (b *Bridge) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	cs := b.current()
	if cs == nil {
		return nil, ErrNotRunning
	}
	return served(cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI}))
}

func (b *Bridge) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	cs := b.current()
	if cs == nil {
		return nil, ErrNotRunning
	}
	return served(cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: req.Params.Name, Arguments: req.Params.Arguments}))
}

func (b *Bridge) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	cs := b.current()
	if cs == nil {
		return nil, ErrNotRunning
	}
	return served(cs.Complete(ctx, req.Params))
}

// subscribe subscribes at the process, once for every session of the
// bridge subscribed to the URI, and remembers which sessions are, so that
// the next process is asked for it again (resubscribe) while any is. The
// session is recorded first, so that a process started meanwhile is
// asked for it too.
func (b *Bridge) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	b.mu.Lock()
	cs := b.session
	first := false
	if cs != nil {
		b.pruneLocked(uri)
		first = len(b.subscriptions[uri]) == 0
		if b.subscriptions[uri] == nil {
			b.subscriptions[uri] = map[*mcp.ServerSession]struct{}{}
		}
		b.subscriptions[uri][req.Session] = struct{}{}
	}
	b.mu.Unlock()
	if cs == nil {
		return ErrNotRunning
	}
	if !first {
		return nil // subscribed at the process already
	}
	err := cs.Subscribe(ctx, req.Params)
	if err != nil {
		b.forget(uri, req.Session)
	}
	return err
}

func (b *Bridge) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	if !b.forget(req.Params.URI, req.Session) {
		return nil // another session is subscribed to it
	}
	cs := b.current()
	if cs == nil {
		return nil
	}
	return cs.Unsubscribe(ctx, req.Params)
}

// forget drops session's subscription to uri and reports whether no live
// session is subscribed to it any more.
func (b *Bridge) forget(uri string, session *mcp.ServerSession) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subscriptions[uri], session)
	b.pruneLocked(uri)
	return len(b.subscriptions[uri]) == 0
}

// pruneLocked drops the subscriptions to uri of sessions that ended
// without unsubscribing (a session's end tells the bridge nothing); mu
// is held.
func (b *Bridge) pruneLocked(uri string) {
	sessions := b.subscriptions[uri]
	if len(sessions) == 0 {
		delete(b.subscriptions, uri)
		return
	}
	live := map[*mcp.ServerSession]bool{}
	for s := range b.server.Sessions() {
		live[s] = true
	}
	for s := range sessions {
		if !live[s] {
			delete(sessions, s)
		}
	}
	if len(sessions) == 0 {
		delete(b.subscriptions, uri)
	}
}

// progressTapped is the process's transport, whose connection relays the
// process's progress notifications as they are read: go-sdk hands
// notifications to their handler on a goroutine of its own, where the
// call's response, read next, could overtake them and end the stream
// they go on.
type progressTapped struct {
	mcp.Transport
	relay *progressRelay
}

func (t progressTapped) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return progressTap{Connection: conn, relay: t.relay}, nil
}

type progressTap struct {
	mcp.Connection
	relay *progressRelay
}

func (c progressTap) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && !req.ID.IsValid() && req.Method == "notifications/progress" {
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(req.Params, &p) == nil {
			c.relay.relay(&p)
		}
	}
	return msg, err
}
