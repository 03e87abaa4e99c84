package svcauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/config"
)

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// A server may hold the SHA-256 of a caller's token instead of the token
// (tokenSHA256): the token authenticates as that credential, in either
// case of hex, and nothing else does.
func TestTokenSHA256Authenticates(t *testing.T) {
	a := NewAuthenticator([]config.ServiceCredential{
		{Name: "gateway", TokenSHA256: sha256Hex("gateway-to-aggregator"), AssertPrincipals: true, Allow: config.GatewayMethods},
		{Name: "indexer", TokenSHA256: strings.ToUpper(sha256Hex("indexer-to-aggregator")), AssertPrincipals: true, Allow: config.IndexerMethods},
		{Name: "internal", Token: "internal-token", Subject: "internal", Allow: config.IndexerMethods},
	})
	for tok, want := range map[string]string{
		"gateway-to-aggregator":            "gateway",
		"indexer-to-aggregator":            "indexer",
		"internal-token":                   "internal",
		"gateway-to-indexer":               "",
		sha256Hex("gateway-to-aggregator"): "", // the digest is not the token
		"":                                 "",
	} {
		c, ok := a.Authenticate(withToken(tok))
		got := ""
		if ok {
			got = c.Name
			if c.Identity != identityToken {
				t.Errorf("token %q: identity %q, want %q", tok, c.Identity, identityToken)
			}
		}
		if got != want {
			t.Errorf("token %q: authenticated as %q, want %q", tok, got, want)
		}
	}
	// Under mTLS the digest form binds to the certificate as a token does.
	b := NewAuthenticator([]config.ServiceCredential{
		{Name: "gateway", TokenSHA256: sha256Hex("gw"), URISAN: "spiffe://x/gateway", AssertPrincipals: true, Allow: config.GatewayMethods},
		{Name: "indexer", TokenSHA256: sha256Hex("idx"), URISAN: "spiffe://x/indexer", AssertPrincipals: true, Allow: config.IndexerMethods},
	})
	if c, ok := b.Authenticate(overMTLS("spiffe://x/gateway", "gw")); !ok || c.Name != "gateway" {
		t.Errorf("gateway's token and certificate: %q %v", c.Name, ok)
	}
	if c, ok := b.Authenticate(overMTLS("spiffe://x/indexer", "gw")); ok {
		t.Errorf("gateway's token with the indexer's certificate authenticated as %q", c.Name)
	}
}

// The table keeps one form for both ways of configuring a token, its
// SHA-256: no plaintext token stays in memory for the comparison, and a
// token and its digest configured for two credentials are the same entry
// kind.
func TestTokenTableHoldsDigestsOnly(t *testing.T) {
	tbl := newCredentialTable([]config.ServiceCredential{
		{Name: "plain", Token: "plain-token", Allow: config.IndexerMethods},
		{Name: "digest", TokenSHA256: sha256Hex("digest-token"), Allow: config.IndexerMethods},
	})
	if len(tbl.byToken) != 2 {
		t.Fatalf("%d token entries, want 2", len(tbl.byToken))
	}
	want := map[string][sha256.Size]byte{"plain": sha256.Sum256([]byte("plain-token")), "digest": sha256.Sum256([]byte("digest-token"))}
	for _, e := range tbl.byToken {
		if e.digest != want[e.caller.Name] {
			t.Errorf("%s: entry digest %x, want %x", e.caller.Name, e.digest, want[e.caller.Name])
		}
	}
	for _, e := range tbl.byToken {
		v := reflect.ValueOf(e)
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8 || f.Kind() == reflect.String && strings.Contains(f.String(), "token") {
				t.Errorf("tokenEntry.%s of %s holds %v: the table keeps only the token's digest", v.Type().Field(i).Name, e.caller.Name, f)
			}
		}
	}
}

// The presented token is hashed once and its digest compared with every
// stored digest, in constant time and without stopping at a match, so
// neither the length of the token nor where its credential sits in the
// list shows in the time a call takes.
func TestTokenComparedWithEveryDigest(t *testing.T) {
	creds := []config.ServiceCredential{
		{Name: "first", Token: "first-token", Allow: config.IndexerMethods},
		{Name: "second", TokenSHA256: sha256Hex("second-token"), Allow: config.IndexerMethods},
		{Name: "third", Token: "a-much-longer-third-token-than-the-others", Allow: config.IndexerMethods},
		{Name: "no-token", URISAN: "spiffe://x/no-token", Allow: config.IndexerMethods},
	}
	a := NewAuthenticator(creds)
	var compared [][2][sha256.Size]byte
	old := digestsEqual
	digestsEqual = func(x, y *[sha256.Size]byte) bool {
		compared = append(compared, [2][sha256.Size]byte{*x, *y})
		return old(x, y)
	}
	t.Cleanup(func() { digestsEqual = old })
	for _, tok := range []string{"first-token", "second-token", "x", strings.Repeat("long", 100)} {
		compared = nil
		a.Authenticate(withToken(tok))
		if len(compared) != 3 {
			t.Errorf("token %q compared with %d digests, want every one of the 3", tok, len(compared))
		}
		presented := sha256.Sum256([]byte(tok))
		for _, pair := range compared {
			if pair[0] != presented && pair[1] != presented {
				t.Errorf("token %q: a comparison without the presented token's digest", tok)
			}
		}
	}
}

// The tap authenticates before anything is known of the caller, and gRPC
// admits a header list of some 316,000 "authorization: Bearer x" fields
// (a byte each on the wire once HPACK indexed the first): a call sending
// more than one value is refused without any of them hashed.
func TestManyAuthorizationValuesAreRefusedUnhashed(t *testing.T) {
	a := NewAuthenticator([]config.ServiceCredential{{Name: "first", Token: "first-token", Allow: config.IndexerMethods}})
	compared := 0
	old := digestsEqual
	digestsEqual = func(x, y *[sha256.Size]byte) bool { compared++; return old(x, y) }
	t.Cleanup(func() { digestsEqual = old })
	values := make([]string, 10_000)
	for i := range values {
		values[i] = "Bearer first-token"
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{"authorization": values})
	if _, ok := a.Authenticate(ctx); ok || compared != 0 {
		t.Errorf("10,000 authorization values: admitted %v after %d digest comparisons, want refused after none", ok, compared)
	}
}
