package svcauth

import (
	"context"
	"testing"
)

// A LiveToken sends the token in force when a call starts, none when it
// is empty, and a replacement from then on.
func TestLiveTokenReplaced(t *testing.T) {
	tok := NewLiveToken("first", false)
	md, _ := tok.GetRequestMetadata(context.Background())
	if md["authorization"] != "Bearer first" {
		t.Fatalf("metadata %v", md)
	}
	tok.Set("second")
	if md, _ := tok.GetRequestMetadata(context.Background()); md["authorization"] != "Bearer second" || len(md) != 1 {
		t.Fatalf("after Set: %v", md)
	}
	tok.Set("")
	if md, _ := tok.GetRequestMetadata(context.Background()); len(md) != 0 {
		t.Fatalf("an empty token sent %v", md)
	}
}
