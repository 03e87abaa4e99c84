package svcauth

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/config"
)

func withToken(tok string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
}

// TestUpdateRotatesCredentials replaces the credentials as a reload does:
// a removed token stops working, an added one works, and a changed allow
// list applies to the next call.
func TestUpdateRotatesCredentials(t *testing.T) {
	const method = "/switchboard.indexer.v1.IndexerService/Search"
	a := NewAuthenticator([]config.ServiceCredential{{Name: "old", Token: "tok-old", Allow: []string{"switchboard.indexer.v1.IndexerService/*"}}})
	if c, ok := a.Authenticate(withToken("tok-old")); !ok || !c.MayCall(method) {
		t.Fatalf("old token before the update: %v %v", c.Name, ok)
	}
	a.Update([]config.ServiceCredential{{Name: "new", Token: "tok-new", Allow: []string{"switchboard.aggregator.v1.AggregatorService/*"}}})
	if _, ok := a.Authenticate(withToken("tok-old")); ok {
		t.Fatal("the removed token still authenticates")
	}
	c, ok := a.Authenticate(withToken("tok-new"))
	if !ok || c.Name != "new" {
		t.Fatalf("the added token: %q %v", c.Name, ok)
	}
	if c.MayCall(method) {
		t.Fatal("the new credential's allow list is not the one in force")
	}
}
