package session

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func TestSealState(t *testing.T) {
	alice := &commonv1.Principal{Subject: "alice"}
	binding := RequestBinding("", "tools/call", "ask", json.RawMessage(`{"a":1}`))
	s, _ := NewSealer(key, time.Hour)
	sealed, err := s.SealState(alice, binding, "backend-state", time.Minute)
	if err != nil || strings.Contains(sealed, "backend-state") {
		t.Fatalf("sealed %q, %v", sealed, err)
	}
	other, _ := NewSealer(key, time.Hour)
	got, err := other.OpenState(alice, binding, sealed)
	if err != nil || got.State != "backend-state" || got.ID == "" || !got.ExpiresAt.After(time.Now()) {
		t.Fatalf("open on another replica: %+v %v", got, err)
	}
	again, _ := s.SealState(alice, binding, "backend-state", time.Minute)
	if o, _ := s.OpenState(alice, binding, again); o.ID == got.ID {
		t.Fatal("two sealings share a one-time id")
	}
	later, _ := NewSealer(key, time.Hour)
	later.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	sessionID, _, _ := s.Mint(alice, "", "2025-11-25", nil)
	for name, open := range map[string]func() (OpenedState, error){
		"other principal": func() (OpenedState, error) {
			return s.OpenState(&commonv1.Principal{Subject: "bob"}, binding, sealed)
		},
		"other tool": func() (OpenedState, error) {
			return s.OpenState(alice, RequestBinding("", "tools/call", "other", json.RawMessage(`{"a":1}`)), sealed)
		},
		"other arguments": func() (OpenedState, error) {
			return s.OpenState(alice, RequestBinding("", "tools/call", "ask", json.RawMessage(`{"a":2}`)), sealed)
		},
		"expired":           func() (OpenedState, error) { return later.OpenState(alice, binding, sealed) },
		"tampered":          func() (OpenedState, error) { return s.OpenState(alice, binding, sealed[:len(sealed)-3]+"AAA") },
		"raw backend state": func() (OpenedState, error) { return s.OpenState(alice, binding, "backend-state") },
		"a session id": func() (OpenedState, error) {
			return s.OpenState(alice, binding, "r1."+strings.TrimPrefix(sessionID, "s1."))
		},
	} {
		if _, err := open(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

// TestRequestBinding: the same arguments however encoded bind alike;
// anything else that differs does not.
func TestRequestBinding(t *testing.T) {
	b := RequestBinding("", "tools/call", "pay", json.RawMessage(`{"to":"bob","amount":3,"meta":{"b":[1,2],"a":null}}`))
	for _, same := range []string{`{"amount":3,"to":"bob","meta":{"a":null,"b":[1,2]}}`, " {\n\"meta\" : {\"a\":null,\"b\":[1, 2]}, \"amount\":3, \"to\":\"\\u0062ob\"}"} {
		if RequestBinding("", "tools/call", "pay", json.RawMessage(same)) != b {
			t.Errorf("%s binds differently", same)
		}
	}
	for _, other := range []string{`{"to":"bob","amount":300,"meta":{"b":[1,2],"a":null}}`, `{"to":"bob","amount":3.0,"meta":{"b":[1,2],"a":null}}`,
		`{"to":"bob","amount":3,"meta":{"b":[2,1],"a":null}}`, `{"to":"bob","amount":3}`, `{}`} {
		if RequestBinding("", "tools/call", "pay", json.RawMessage(other)) == b {
			t.Errorf("%s binds like the original", other)
		}
	}
	if RequestBinding("", "tools/call", "pa", json.RawMessage(`{"y":1}`)) == RequestBinding("", "tools/call", "pay", json.RawMessage(`{"":1}`)) ||
		RequestBinding("", "prompts/get", "pay", nil) == RequestBinding("", "tools/call", "pay", nil) {
		t.Error("fields run together")
	}
	if RequestBinding("support", "tools/call", "pay", nil) == RequestBinding("", "tools/call", "pay", nil) ||
		RequestBinding("a", "tools/call", "pay", nil) == RequestBinding("b", "tools/call", "pay", nil) {
		t.Error("a binding does not depend on the server")
	}
	if RequestBinding("", "resources/read", "u", nil) != RequestBinding("", "resources/read", "u", json.RawMessage("null")) {
		t.Error("absent and null arguments differ")
	}
}

// TestStateUsesLocal: without an indexer a state is used once on this
// replica, an expired record is forgotten, and a full record refuses new
// uses instead of forgetting live ones.
func TestStateUsesLocal(t *testing.T) {
	u := NewStateUses(nil, nil, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	in := time.Now().Add(time.Minute)
	if err := u.Consume(ctx, "p", "a", in); err != nil {
		t.Fatal(err)
	}
	if err := u.Consume(ctx, "p", "a", in); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use: %v", err)
	}
	// Others fill the record (the principal's own share is untouched).
	for i := len(u.local); i < maxLocalStateUses; i++ {
		u.local[strconv.Itoa(i)+"x"] = localUse{until: in, principal: "other" + strconv.Itoa(i%20)}
		u.owners["other"+strconv.Itoa(i%20)]++
	}
	if err := u.Consume(ctx, "p", "b", in); !errors.Is(err, ErrUnrecorded) {
		t.Fatalf("a full record: %v", err)
	}
	if err := u.Consume(ctx, "p", "a", in); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a full record forgot a live use: %v", err)
	}
	u.now = func() time.Time { return in.Add(time.Second) }
	if err := u.Consume(ctx, "p", "b", in.Add(time.Hour)); err != nil {
		t.Fatalf("after every record expired: %v", err)
	}
	if len(u.local) != 1 {
		t.Fatalf("%d records kept, want the one live", len(u.local))
	}
	// A use given back (a limit refused the retry) is good once more,
	// and only once; giving back a state never used changes nothing.
	u.Release(ctx, "b")
	u.Release(ctx, "never")
	if len(u.local) != 0 || len(u.owners) != 0 {
		t.Fatalf("after the release: %d records, owners %v", len(u.local), u.owners)
	}
	if err := u.Consume(ctx, "p", "b", in.Add(time.Hour)); err != nil {
		t.Fatalf("the use after a release: %v", err)
	}
	if err := u.Consume(ctx, "p", "b", in.Add(time.Hour)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a replay after the release's use: %v", err)
	}
}

// consumeIndexer is an IndexerServiceClient that answers
// ConsumeRequestState from a map, or with err.
type consumeIndexer struct {
	indexerv1.IndexerServiceClient
	mu   sync.Mutex
	seen map[string]bool
	err  error
	// principals are the principal digests the requests named.
	principals []string
}

func (c *consumeIndexer) ConsumeRequestState(_ context.Context, req *indexerv1.ConsumeRequestStateRequest, _ ...grpc.CallOption) (*indexerv1.ConsumeRequestStateResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	c.principals = append(c.principals, req.GetPrincipalDigest())
	first := !c.seen[req.GetStateDigest()]
	c.seen[req.GetStateDigest()] = true
	return &indexerv1.ConsumeRequestStateResponse{FirstUse: first}, nil
}

// TestStateUsesIndexer: with an indexer its answer decides, and an
// indexer that cannot answer refuses the use without using the state up.
func TestStateUsesIndexer(t *testing.T) {
	idx := &consumeIndexer{seen: map[string]bool{}}
	u := NewStateUses(idx, nil, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	in := time.Now().Add(time.Minute)
	if err := u.Consume(ctx, "p", "a", in); err != nil {
		t.Fatal(err)
	}
	if err := NewStateUses(idx, nil, slog.New(slog.DiscardHandler)).Consume(ctx, "p", "a", in); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a replay at another replica: %v", err)
	}
	idx.err = status.Error(codes.Unavailable, "down")
	if err := u.Consume(ctx, "p", "b", in); !errors.Is(err, ErrUnrecorded) {
		t.Fatalf("with the indexer down: %v", err)
	}
	idx.err = nil
	if err := u.Consume(ctx, "p", "b", in); err != nil {
		t.Fatalf("the state refused while the indexer was down is still good: %v", err)
	}
	for d := range idx.seen {
		if len(d) != 64 {
			t.Fatalf("the indexer got %q, want a SHA-256 digest", d)
		}
	}
	// Each record names its principal, whose share of the gateway's
	// records the indexer bounds.
	for _, p := range idx.principals {
		if p != "p" {
			t.Fatalf("the indexer was told principal %q, want p", p)
		}
	}
}

// TestStateHasOneSpelling: a sealed request state opens in the spelling it
// was sealed in and in no other.
func TestStateHasOneSpelling(t *testing.T) {
	alice := &commonv1.Principal{Subject: "alice"}
	binding := RequestBinding("", "tools/call", "ask", json.RawMessage(`{"a":1}`))
	s, _ := NewSealer(key, time.Hour)
	tried := 0
	for n := range 6 {
		sealed, err := s.SealState(alice, binding, "backend-state"+strings.Repeat("x", n), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.OpenState(alice, binding, sealed); err != nil {
			t.Fatalf("sealed state does not open: %v", err)
		}
		body := strings.TrimPrefix(sealed, stateVersion)
		other, ok := respelled(sealVersion + body)
		if !ok {
			continue
		}
		other = stateVersion + strings.TrimPrefix(other, sealVersion)
		tried++
		if _, err := s.OpenState(alice, binding, other); !errors.Is(err, ErrInvalid) {
			t.Errorf("another spelling of a state opened: %v", err)
		}
	}
	if tried == 0 {
		t.Fatal("no state had another spelling to try")
	}
}

// TestStateUsesLocalShare: without an indexer one principal can fill only
// its share of the record; another principal's retries still go through.
func TestStateUsesLocalShare(t *testing.T) {
	u := NewStateUses(nil, nil, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	in := time.Now().Add(time.Minute)
	for i := range maxLocalStateUsesPerPrincipal {
		if err := u.Consume(ctx, "mallory", strconv.Itoa(i), in); err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
	}
	if err := u.Consume(ctx, "mallory", "one more", in); !errors.Is(err, ErrUnrecorded) {
		t.Fatalf("past the principal's share: %v", err)
	}
	if err := u.Consume(ctx, "alice", "alice's", in); err != nil {
		t.Fatalf("another principal, record not full: %v", err)
	}
	u.now = func() time.Time { return in.Add(2 * time.Second) }
	if err := u.Consume(ctx, "mallory", "after expiry", in.Add(time.Hour)); err != nil {
		t.Fatalf("after mallory's uses expired: %v", err)
	}
	if u.owners["mallory"] != 1 || u.owners["alice"] != 0 {
		t.Fatalf("owners after the sweep: %v", u.owners)
	}
}

// TestStateUsesLocalSharesAreFair: ten principals that each kept to
// their share once filled the whole record without an indexer, and every
// other principal's retries were refused until theirs expired; shares
// shrink once half the record is used, so a newcomer still gets a fair
// part of what is left.
func TestStateUsesLocalSharesAreFair(t *testing.T) {
	u := NewStateUses(nil, nil, slog.New(slog.DiscardHandler))
	ctx, in, n := context.Background(), time.Now().Add(time.Minute), 0
	useShare := func(principal string) int {
		for got := 0; ; got++ {
			n++
			err := u.Consume(ctx, principal, strconv.Itoa(n), in)
			if errors.Is(err, ErrUnrecorded) {
				return got
			}
			if err != nil || got > maxLocalStateUsesPerPrincipal {
				t.Fatalf("%s's use %d: %v", principal, got+1, err)
			}
		}
	}
	for i := range 10 {
		useShare("mallory-" + strconv.Itoa(i))
	}
	if len(u.local) >= maxLocalStateUses*9/10 {
		t.Fatalf("ten principals hold %d of the record's %d", len(u.local), maxLocalStateUses)
	}
	if alice := useShare("alice"); alice < maxLocalStateUsesPerPrincipal/4 {
		t.Fatalf("alice recorded %d uses after ten principals took theirs; want a fair part of what is left", alice)
	}
}

// A retry refused because the indexer could not record its state is
// logged at most once a minute, however often the client resends it, and
// not at all when the principal's share of the records is full (its own
// bound).
func TestStateUsesWarnOnceAMinute(t *testing.T) {
	idx := &consumeIndexer{seen: map[string]bool{}, err: status.Error(codes.Unavailable, "down")}
	logs := &testkit.LogBuffer{}
	u := NewStateUses(idx, nil, slog.New(slog.NewTextHandler(logs, nil)))
	now := time.Now()
	u.now = func() time.Time { return now }
	warnings := func() int { return strings.Count(logs.String(), "could not be recorded as used") }
	for range 200 {
		if err := u.Consume(context.Background(), "p", "a", now.Add(time.Minute)); !errors.Is(err, ErrUnrecorded) {
			t.Fatal(err)
		}
	}
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings for 200 refused retries within a minute", n)
	}
	now = now.Add(2 * time.Minute)
	idx.err = status.Error(codes.ResourceExhausted, "this principal holds too many request states")
	_ = u.Consume(context.Background(), "p", "b", now.Add(time.Minute))
	if n := warnings(); n != 1 {
		t.Fatalf("a principal's full share was logged (%d warnings)", n)
	}
}
