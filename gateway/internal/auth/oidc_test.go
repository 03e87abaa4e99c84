package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Modes of an outage-prone JWKS endpoint.
const (
	serving = iota
	hanging
	failing
)

// flakyIssuer puts an issuer's JWKS behind a switch: serve, hang (until
// released) or fail.
type flakyIssuer struct {
	*issuer
	mode    atomic.Int32
	fetches atomic.Int64
	hung    chan struct{} // receives once per fetch that starts hanging
	release chan struct{}
	url     string
}

func newFlakyIssuer(t *testing.T) *flakyIssuer {
	f := &flakyIssuer{issuer: newIssuer(t), hung: make(chan struct{}, 64), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.fetches.Add(1)
		switch f.mode.Load() {
		case hanging:
			f.hung <- struct{}{}
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
		case failing:
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		f.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
	})
	f.url = srv.URL
	return f
}

// fakeClock is the time the authenticator sees.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const (
	testMinInterval = 10 * time.Second
	testMaxBackoff  = 35 * time.Second
	testMaxAge      = 10 * time.Minute
)

func newTestOIDC(t *testing.T, f *flakyIssuer) (*OIDC, *fakeClock) {
	o, err := NewOIDC(config.OIDC{Issuer: "https://issuer.test", Audience: "switchboard", JWKSURL: f.url, JWKSRefresh: config.JWKSRefresh{
		MinInterval: config.Duration(testMinInterval), MaxBackoff: config.Duration(testMaxBackoff), MaxAge: config.Duration(testMaxAge), Timeout: config.Duration(time.Minute),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Now()}
	o.now = clock.Now
	return o, clock
}

func validClaims() jwt.Claims {
	now := time.Now()
	return jwt.Claims{Issuer: "https://issuer.test", Audience: jwt.Audience{"switchboard"}, Subject: "carol",
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
}

// waitRefreshDone waits until no fetch is under way.
func waitRefreshDone(t *testing.T, o *OIDC) {
	t.Helper()
	o.mu.Lock()
	r := o.inflight
	o.mu.Unlock()
	if r != nil {
		<-r.done
	}
}

// tokenNaming is a token signed with the issuer's current key but naming
// kid, which the issuer never published.
func tokenNaming(t *testing.T, f *flakyIssuer, kid string) string {
	f.mu.Lock()
	key := f.keys[f.current]
	f.mu.Unlock()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(validClaims()).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOIDCHungIssuer: while a fetch hangs, tokens whose key is held are
// verified at once (the hung fetch being the background refresh of old
// keys); tokens with an unknown kid wait for that one fetch, and no other
// starts.
func TestOIDCHungIssuer(t *testing.T) {
	f := newFlakyIssuer(t)
	o, clock := newTestOIDC(t, f)
	known := f.token(t, "k1", validClaims(), nil)
	if _, err := o.Authenticate(request(known), ""); err != nil {
		t.Fatal(err)
	}
	f.mode.Store(hanging)
	clock.Advance(testMaxAge)
	if _, err := o.Authenticate(request(known), ""); err != nil {
		t.Fatalf("held key, old set: %v", err)
	}
	<-f.hung // the background refresh is held by the issuer
	for range 100 {
		if _, err := o.Authenticate(request(known), ""); err != nil {
			t.Fatalf("held key while the issuer hangs: %v", err)
		}
	}
	// A key the issuer publishes only now: its tokens wait for the fetch
	// under way (here until they give up) instead of starting their own.
	f.rotate(t, "k2")
	rotated := f.token(t, "k2", validClaims(), nil)
	for range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := o.Authenticate(request(rotated).WithContext(ctx), "")
		cancel()
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("unknown kid while the fetch hangs: %v", err)
		}
	}
	if n := f.fetches.Load(); n != 2 {
		t.Errorf("%d fetches while one hangs, want 2 (the first and the held one)", n)
	}
	f.mode.Store(serving)
	close(f.release)
	waitRefreshDone(t, o)
	if _, err := o.Authenticate(request(rotated), ""); err != nil {
		t.Errorf("rotated key after the held fetch returned: %v", err)
	}
	if n := f.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// TestOIDCUnknownKidsRateLimited: a flood of unknown key ids fetches once
// per MinInterval, whether the issuer answers or fails, with back-off
// after failures.
func TestOIDCUnknownKidsRateLimited(t *testing.T) {
	f := newFlakyIssuer(t)
	o, clock := newTestOIDC(t, f)
	flood := func() {
		for i := range 50 {
			if _, err := o.Authenticate(request(tokenNaming(t, f, fmt.Sprint("forged-", i))), ""); !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("unknown kid: %v", err)
			}
			waitRefreshDone(t, o)
		}
	}
	flood()
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for 50 unknown kids at one instant, want 1", n)
	}
	clock.Advance(testMinInterval - time.Millisecond)
	flood()
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches before MinInterval passed, want 1", n)
	}
	clock.Advance(time.Millisecond)
	flood()
	if n := f.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches once MinInterval passed, want 2", n)
	}

	// Failures back off: MinInterval, then doubled, capped at MaxBackoff.
	f.mode.Store(failing)
	clock.Advance(testMinInterval)
	want := int64(3)
	for _, wait := range []time.Duration{testMinInterval, 2 * testMinInterval, testMaxBackoff, testMaxBackoff} {
		flood()
		if n := f.fetches.Load(); n != want {
			t.Fatalf("%d fetches, want %d", n, want)
		}
		clock.Advance(wait - time.Millisecond)
		flood()
		if n := f.fetches.Load(); n != want {
			t.Fatalf("fetched again %v after failure %d, before its back-off of %v", wait-time.Millisecond, want-2, wait)
		}
		clock.Advance(time.Millisecond)
		want++
	}
	// Held keys are still used while the issuer fails.
	held := f.token(t, f.current, validClaims(), nil)
	if _, err := o.Authenticate(request(held), ""); err != nil {
		t.Fatalf("held key while the issuer fails: %v", err)
	}
	f.mode.Store(serving)
	flood()
	clock.Advance(testMinInterval)
	flood()
	if n := f.fetches.Load(); n != want+1 {
		t.Fatalf("%d fetches after recovery, want %d (back-off reset to MinInterval)", n, want+1)
	}
}

// TestOIDCColdStartIssuerDown: with no keys held and the issuer down, a
// token is refused with "signing keys unavailable", quickly and without
// a fetch per request.
func TestOIDCColdStartIssuerDown(t *testing.T) {
	f := newFlakyIssuer(t)
	f.mode.Store(failing)
	o, _ := newTestOIDC(t, f)
	for range 20 {
		_, err := o.Authenticate(request(f.token(t, "k1", validClaims(), nil)), "")
		if !errors.Is(err, ErrKeysUnavailable) {
			t.Fatalf("issuer down at start: %v", err)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}
