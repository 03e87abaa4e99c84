package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// TestCallNamesCallerUnlessEdge runs requests through the service
// authentication interceptor as each kind of credential: an edge's (the
// gateway's) event names no caller, an operator's and a bound service's
// name their credential, and the JSON line carries it as "caller" (left
// out when empty: the schema's older readers see nothing new).
func TestCallNamesCallerUnlessEdge(t *testing.T) {
	const method = "/switchboard.indexer.v1.IndexerService/Search"
	allow := []string{"switchboard.indexer.v1.IndexerService/Search"}
	auth := svcauth.NewAuthenticator([]config.ServiceCredential{
		{Name: "gateway", Token: "tok-gateway", AssertPrincipals: true, Allow: allow},
		{Name: "console", Token: "tok-console", AssertPrincipals: true, Operator: true, Allow: allow},
		{Name: "batch", Token: "tok-batch", Subject: "batch-job", Allow: allow},
	})
	intercept := auth.UnaryInterceptor()
	for _, tc := range []struct {
		token, asks, wantCaller, wantSubject string
	}{
		{"tok-gateway", "erin", "", "erin"},
		{"tok-console", "erin", "console", "erin"},
		{"tok-batch", "", "batch", "batch-job"},
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tc.token))
		req := &indexerv1.SearchRequest{Principal: &commonv1.Principal{Subject: tc.asks}, Query: "q"}
		var e Event
		_, err := intercept(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, _ any) (any, error) {
			e = Call(ctx, KindFindTool, svcauth.PrincipalFrom(ctx), time.Now())
			return nil, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.token, err)
		}
		if e.Caller != tc.wantCaller || e.Subject != tc.wantSubject {
			t.Errorf("%s: caller %q subject %q, want %q %q", tc.token, e.Caller, e.Subject, tc.wantCaller, tc.wantSubject)
		}
		if got := ToProto(&e).GetCaller(); got != tc.wantCaller {
			t.Errorf("%s: proto caller %q, want %q", tc.token, got, tc.wantCaller)
		}

		var buf bytes.Buffer
		w := newTestWriter(t, config.Audit{}, NewJSONLines("test", &buf), nil)
		e.Outcome = OutcomeOK
		w.Record(e)
		w.Close()
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%s: not one JSON line: %q: %v", tc.token, buf.String(), err)
		}
		got, present := line["caller"]
		if tc.wantCaller == "" && present || tc.wantCaller != "" && got != tc.wantCaller {
			t.Errorf("%s: JSON caller = %v (present %v), want %q", tc.token, got, present, tc.wantCaller)
		}
	}

	// A request that came over no authenticated call (the gateway's own
	// events) names none.
	if e := Call(context.Background(), KindSessionStart, &commonv1.Principal{Subject: "erin"}, time.Now()); e.Caller != "" {
		t.Fatalf("caller %q without a service call", e.Caller)
	}
}
