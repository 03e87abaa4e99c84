package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
)

// A Modern backend asks for client input (elicitation, sampling, roots) by
// returning an input_required result. A Legacy client cannot read that, but
// it can answer server-to-client requests sent on its POST's response
// stream. The gateway bridges: it sends the input requests on that stream,
// waits for the client's answers (separate POSTs of JSON-RPC responses),
// and retries the call with them.
//
// The answers must reach the replica that holds the stream. Everything
// else about a Legacy session works on any replica; a multi-replica
// deployment serving Legacy clients whose tools ask for input needs client
// affinity for the length of such a call, or the call waits until its
// timeout.

// maxInputRounds bounds how often one request may ask the client for input.
const maxInputRounds = 10

// pendingReplies routes client answers to the request waiting for them.
type pendingReplies struct {
	mu      sync.Mutex
	waiters map[string]chan object
}

func newPendingReplies() *pendingReplies {
	return &pendingReplies{waiters: map[string]chan object{}}
}

func pendingKey(sessionKey string, id json.RawMessage) string {
	return sessionKey + "\x00" + string(id)
}

func (p *pendingReplies) register(key string) chan object {
	ch := make(chan object, 1)
	p.mu.Lock()
	p.waiters[key] = ch
	p.mu.Unlock()
	return ch
}

func (p *pendingReplies) forget(key string) {
	p.mu.Lock()
	delete(p.waiters, key)
	p.mu.Unlock()
}

// deliver hands a reply to its waiter, if it is still waiting on this
// replica. Keys include the session, so one session cannot answer another's
// requests.
func (p *pendingReplies) deliver(sessionKey string, id json.RawMessage, reply object) {
	key := pendingKey(sessionKey, id)
	p.mu.Lock()
	ch, ok := p.waiters[key]
	delete(p.waiters, key)
	p.mu.Unlock()
	if ok {
		ch <- reply
	}
}

// backendOp performs one attempt of tools/call, resources/read or
// prompts/get with the given round-trip state.
type backendOp func(ctx context.Context, rt roundTrip) (resultJSON, resultType string, err error)

// roundTrips runs op and, for Legacy sessions, answers input_required
// results by asking the client, then shapes the final result.
func (g *Gateway) roundTrips(ctx context.Context, c *call, rt roundTrip, cacheable bool, op backendOp) (json.RawMessage, *rpcError) {
	for round := 0; ; round++ {
		resultJSON, resultType, err := op(ctx, rt)
		if err != nil {
			return nil, grpcError(ctx, g.log, err, c.era, c.method)
		}
		if c.era != eraLegacy || round == maxInputRounds {
			return g.backendResult(ctx, c, rt, resultJSON, resultType, cacheable)
		}
		res, err := decodeObject(resultJSON)
		if err != nil {
			return nil, grpcError(ctx, g.log, err, c.era, c.method)
		}
		if resultType == "" {
			_ = json.Unmarshal(res["resultType"], &resultType)
		}
		if resultType != "input_required" {
			return g.backendResult(ctx, c, rt, resultJSON, resultType, cacheable)
		}
		answers, rerr := g.askLegacyClient(ctx, c, res)
		if rerr != nil {
			return nil, rerr
		}
		rt.inputResponses = answers
		rt.requestState = ""
		if raw, ok := res["requestState"]; ok {
			_ = json.Unmarshal(raw, &rt.requestState)
		}
	}
}

// askLegacyClient sends the input requests of res to the Legacy client on
// the response stream and collects its answers, keyed as the backend asked.
func (g *Gateway) askLegacyClient(ctx context.Context, c *call, res object) (string, *rpcError) {
	var requests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if raw, ok := res["inputRequests"]; ok && json.Unmarshal(raw, &requests) != nil {
		return "", newError(codeInternalError, "internal error: malformed input requests from the server")
	}
	if len(requests) == 0 {
		// Load shedding: only requestState, retry with it.
		return "", nil
	}
	for _, req := range requests {
		capName, known := inputCapability[req.Method]
		if !known {
			return "", newError(codeInternalError, "internal error: unsupported input request from the server")
		}
		if _, declared := c.clientCaps[capName]; !declared {
			return "", newError(codeInternalError, "this request needs the client capability "+capName+", which the session did not declare")
		}
	}
	if !c.streaming {
		startSSE(c.w)
		c.streaming = true
	}
	waits := map[string]chan object{}
	for key, req := range requests {
		id := newRequestID()
		pk := pendingKey(c.sessionKey, id)
		waits[key] = g.pending.register(pk)
		defer g.pending.forget(pk)
		msg, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params,omitempty"`
		}{"2.0", id, req.Method, req.Params})
		if _, err := c.w.Write(sseEvent(msg)); err != nil {
			return "", newError(codeInternalError, "request cancelled")
		}
	}
	if http.NewResponseController(c.w).Flush() != nil {
		return "", newError(codeInternalError, "request cancelled")
	}
	answers := object{}
	for key, ch := range waits {
		select {
		case reply := <-ch:
			result, ok := reply["result"]
			if !ok {
				return "", newError(codeInternalError, "the client did not fulfil the server's "+requests[key].Method+" request")
			}
			answers[key] = result
		case <-ctx.Done():
			return "", newError(codeInternalError, "no answer from the client to the server's "+requests[key].Method+" request")
		}
	}
	return string(answers.encode()), nil
}

// newRequestID makes a server-to-client request id no client can predict.
func newRequestID() json.RawMessage {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	id, _ := json.Marshal("sb-" + hex.EncodeToString(b))
	return id
}
