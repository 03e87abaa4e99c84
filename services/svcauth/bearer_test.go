package svcauth

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// The Bearer scheme is matched without regard to case, as every HTTP
// authentication scheme is: a client library that writes "bearer" is
// authenticated like one that writes "Bearer", and anything that is not
// a Bearer credential names none.
func TestBearerSchemeIgnoresCase(t *testing.T) {
	a := NewAuthenticator([]config.ServiceCredential{{Name: "gateway", Token: "gateway-token", Allow: config.GatewayMethods}})
	tbl := a.table.Load()
	for value, want := range map[string]bool{
		"Bearer gateway-token":    true,
		"bearer gateway-token":    true,
		"BEARER  gateway-token ":  true,
		"Basic gateway-token":     false,
		"Bearer":                  false,
		"Bearer ":                 false,
		"Bearergateway-token":     false,
		"Bearer other-token":      false,
		"Bearer gateway-token-ex": false,
	} {
		c, ok := tbl.authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", value)))
		if ok != want || (ok && c.Name != "gateway") {
			t.Errorf("authorization %q: %+v %v, want authenticated %v", value, c, ok, want)
		}
	}
}
