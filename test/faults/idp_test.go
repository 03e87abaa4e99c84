package faults

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// Modes of the test issuer's JWKS endpoint.
const (
	jwksServe = iota
	jwksHang  // hold every fetch until released (or the gateway gives up)
	jwksFail  // answer 500
)

// testIssuer is an OIDC issuer in the test process: a real HTTP server
// that serves one ES256 key as JWKS, counts the fetches, and can hang or
// fail on demand.
type testIssuer struct {
	url     string
	key     *ecdsa.PrivateKey
	kid     string
	mode    atomic.Int32
	fetches atomic.Int64
	// hung counts fetches being held right now; release ends them.
	hung    atomic.Int64
	mu      sync.Mutex
	release chan struct{}
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key, kid: "k1", release: make(chan struct{})}
	point, err := key.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": is.kid,
		"x": base64.RawURLEncoding.EncodeToString(point[1:33]), "y": base64.RawURLEncoding.EncodeToString(point[33:]),
	}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		switch is.mode.Load() {
		case jwksHang:
			is.mu.Lock()
			release := is.release
			is.mu.Unlock()
			is.hung.Add(1)
			defer is.hung.Add(-1)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		case jwksFail:
			http.Error(w, "issuer down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(is.unhang)
	is.url = srv.URL
	return is
}

// hang makes every fetch wait until unhang.
func (is *testIssuer) hang() {
	is.mu.Lock()
	is.release = make(chan struct{})
	is.mu.Unlock()
	is.mode.Store(jwksHang)
}

// unhang serves again and lets the held fetches complete.
func (is *testIssuer) unhang() {
	is.mode.Store(jwksServe)
	is.mu.Lock()
	defer is.mu.Unlock()
	select {
	case <-is.release:
	default:
		close(is.release)
	}
}

// token is a valid JWT for the gateway, signed with the issuer's key and
// naming kid as its key id (the issuer's own, or any other).
func (is *testIssuer) token(t *testing.T, kid string) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	signed := enc(map[string]string{"alg": "ES256", "typ": "JWT", "kid": kid}) + "." +
		enc(map[string]any{"iss": is.url, "aud": "switchboard", "sub": "carol", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, is.key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func randomKid(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// listAs sends a Modern tools/list with a bearer token and returns the
// HTTP status.
func listAs(ctx context.Context, url, token string) (int, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The gateway's JWKS refresh bounds in this test: short, so that a flood
// of a few seconds spans several intervals and back-offs.
const (
	jwksMinInterval = 400 * time.Millisecond
	jwksMaxBackoff  = 2 * time.Second
	// floodFor is how long each flood of unknown key ids lasts, and
	// floodEvery the pace of its requests.
	floodFor   = 3 * time.Second
	floodEvery = 2 * time.Millisecond
)

// TestIdentityProviderOutage runs an oidc gateway against an issuer that
// hangs and fails: a token whose key the gateway already holds is answered
// while a JWKS fetch is held by the issuer, and a flood of tokens naming
// key ids nobody published makes a bounded number of fetches, with the
// issuer failing and with it serving.
func TestIdentityProviderOutage(t *testing.T) {
	is := newTestIssuer(t)
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "alpha", Spec: backendSpec}},
		NoIndexer: true,
		Configure: func(cfg *config.Config) {
			cfg.Logging.Level = "info"
			cfg.Gateway.Auth = config.GatewayAuth{Mode: "oidc", OIDC: config.OIDC{Issuer: is.url, Audience: "switchboard", JWKSURL: is.url + "/jwks",
				JWKSRefresh: config.JWKSRefresh{MinInterval: config.Duration(jwksMinInterval), MaxBackoff: config.Duration(jwksMaxBackoff)}}}
		},
	})
	ctx := t.Context()
	known := is.token(t, is.kid)
	if st, err := listAs(ctx, c.MCPURL, known); err != nil || st != http.StatusOK {
		t.Fatalf("first request with the issuer up: %d %v", st, err)
	}

	t.Run("hung issuer, known key", func(t *testing.T) {
		is.hang()
		defer is.unhang()
		// Unknown key ids make the gateway refresh its keys (once it may
		// again); keep sending them until one such fetch is held.
		testkit.Eventually(t, "a JWKS fetch held by the issuer", pollDeadline, func() error {
			if is.hung.Load() > 0 {
				return nil
			}
			unknown := is.token(t, randomKid(t))
			go func() { _, _ = listAs(ctx, c.MCPURL, unknown) }()
			return fmt.Errorf("no fetch held yet (%d fetches)", is.fetches.Load())
		})
		st, err := listAs(ctx, c.MCPURL, known)
		stillHung := is.hung.Load() > 0
		if err != nil || st != http.StatusOK {
			t.Fatalf("known key while the issuer hangs: %d %v", st, err)
		}
		if !stillHung {
			t.Fatal("the request with a known key completed only after the held JWKS fetch ended: it waited on the issuer")
		}
	})

	flood := func(t *testing.T) {
		testkit.Eventually(t, "held fetches to end", pollDeadline, func() error {
			if n := is.hung.Load(); n > 0 {
				return fmt.Errorf("%d still held", n)
			}
			return nil
		})
		const requests, workers = int(floodFor / floodEvery), 4
		tokens := make([]string, requests)
		for i := range tokens {
			tokens[i] = is.token(t, randomKid(t))
		}
		before := is.fetches.Load()
		start := time.Now()
		pace := time.NewTicker(floodEvery)
		defer pace.Stop()
		work := make(chan string)
		var wg sync.WaitGroup
		var sent, unexpected atomic.Int64
		for range workers {
			wg.Go(func() {
				for tok := range work {
					sent.Add(1)
					if st, err := listAs(ctx, c.MCPURL, tok); err != nil || st != http.StatusUnauthorized {
						unexpected.Add(1)
					}
				}
			})
		}
		for _, tok := range tokens {
			if time.Since(start) > floodFor {
				break
			}
			<-pace.C
			work <- tok
		}
		close(work)
		wg.Wait()
		elapsed := time.Since(start)
		fetches := is.fetches.Load() - before
		// One fetch may start at once, then one per interval at most.
		bound := 1 + int64(elapsed/jwksMinInterval) + 1
		t.Logf("%d requests with unknown key ids in %v: %d JWKS fetches (bound %d)", sent.Load(), elapsed, fetches, bound)
		if unexpected.Load() > 0 {
			t.Errorf("%d requests with an unknown key id were not answered 401", unexpected.Load())
		}
		if fetches > bound {
			t.Errorf("%d JWKS fetches for %d unknown key ids in %v, want at most %d", fetches, sent.Load(), elapsed, bound)
		}
		if fetches == 0 {
			t.Errorf("no JWKS fetch in %v of unknown key ids: a rotated key would never be found", elapsed)
		}
		if st, err := listAs(ctx, c.MCPURL, known); err != nil || st != http.StatusOK {
			t.Errorf("known key after the flood: %d %v", st, err)
		}
	}
	t.Run("unknown key ids, issuer failing", func(t *testing.T) {
		is.mode.Store(jwksFail)
		defer is.mode.Store(jwksServe)
		flood(t)
	})
	t.Run("unknown key ids, issuer up", flood)
	checkNoCrash(t, procs(c), nil)
}
