package hostile

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// base64URL is the alphabet of session ids (unpadded base64url).
const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// respell returns another spelling of a sealed session id that decodes to
// the same bytes: the last base64 character with one of its unused low bits
// set (a lenient decoder ignores them). ok is false when the id has no
// unused bits (its sealed length is a multiple of 3).
func respell(id string) (string, bool) {
	body, found := strings.CutPrefix(id, "s1.")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if !found || err != nil || len(raw)%3 == 0 {
		return "", false
	}
	last := strings.IndexByte(base64URL, body[len(body)-1])
	// One sealed byte left over uses 2 of the last character's 6 bits, two
	// use 4; the lowest bit is unused either way.
	return id[:len(id)-1] + string(base64URL[last^1]), true
}

// TestSessionIDHasOneSpelling: a Legacy session id is accepted only as
// minted. Another spelling of the same sealed bytes is an unknown session,
// before and after the session is deleted, on POST, GET and DELETE; a
// DELETE of that spelling ends nothing.
func TestSessionIDHasOneSpelling(t *testing.T) {
	_, c := startHarness(t, false, nil)
	// respellable opens a session whose id has another spelling.
	respellable := func() (id, other string) {
		t.Helper()
		for range 20 {
			id = c.initialize(t, aliceKey)
			if other, ok := respell(id); ok {
				minted, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "s1."))
				respelled, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(other, "s1."))
				if err != nil || string(minted) != string(respelled) || id == other {
					t.Fatalf("the respelling is not another spelling of the same bytes: %v", err)
				}
				return id, other
			}
		}
		t.Fatal("20 sessions and none with unused bits in its last character")
		return "", ""
	}
	list := func(session string) response {
		return c.do(t, request{header: legacyHeaders(aliceKey, session), body: legacyBody("tools/list", "")})
	}
	// A GET that opens its stream would never end: only its status is
	// read.
	stream := func(session string) response {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.stack.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		resp.Body.Close()
		return response{status: resp.StatusCode, header: resp.Header}
	}
	del := func(session string) response {
		return c.do(t, request{method: http.MethodDelete, header: []header{{"Authorization", "Bearer " + aliceKey},
			{"Mcp-Session-Id", session}, {"Mcp-Protocol-Version", "2025-11-25"}}})
	}
	want := func(what string, r response, status int) {
		t.Helper()
		if r.status != status {
			t.Errorf("%s: %d %.200s, want %d", what, r.status, r.body, status)
		}
	}

	// Deleted, then presented in another spelling: the bug this guards
	// against served it again.
	id, other := respellable()
	want("the minted id", list(id), http.StatusOK)
	want("DELETE of the minted id", del(id), http.StatusNoContent)
	want("the deleted id", list(id), http.StatusNotFound)
	want("another spelling of the deleted id, POST", list(other), http.StatusNotFound)
	want("another spelling of the deleted id, GET", stream(other), http.StatusNotFound)
	want("another spelling of the deleted id, DELETE", del(other), http.StatusNotFound)

	// A live session in another spelling is unknown too, and deleting that
	// spelling ends nothing.
	id, other = respellable()
	want("the minted id", list(id), http.StatusOK)
	want("another spelling, POST", list(other), http.StatusNotFound)
	want("another spelling, GET", stream(other), http.StatusNotFound)
	want("another spelling, DELETE", del(other), http.StatusNotFound)
	want("the minted id after a DELETE of another spelling", list(id), http.StatusOK)
}
