package grpcapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// An internal client allowed ClusterStateService/* (the document's way to
// let it read its own tasks) acts as its own identity: it reads its own
// principal's tasks, and reaches no other principal's state and none of
// the cluster's whatever its allow list. It may not read the Legacy
// sessions' states (WatchSessionEvents), revoke or check a session,
// watch the revocations, use request states, or record or watch pinned
// tool definitions: each is PERMISSION_DENIED, and the user's session it
// tried to revoke is not revoked.
func TestInternalClientCannotReachOtherPrincipalsSessions(t *testing.T) {
	const clientToken = "cluster-state-client-token-for-the-grpcapi-test"
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "demo"}},
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials, config.ServiceCredential{
				Name: "reporting-tasks", Token: clientToken, Subject: reportingSubject, Groups: []string{"analysts"},
				Allow: []string{"switchboard.indexer.v1.ClusterStateService/*"},
			})
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := indexerv1.NewClusterStateServiceClient(dialRaw(t, c.Config.Indexer.Listen))
	operator := withToken(ctx, c.OperatorToken)

	// A user's Legacy session, with state (its log level) in the indexer,
	// whose digest the operator reads.
	user := harness.Connect(t, c.MCPURL, harness.Legacy)
	if err := user.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatalf("SetLoggingLevel: %v", err)
	}
	var digest string
	testkit.Eventually(t, "the session's state in the indexer", 30*time.Second, func() error {
		w, err := cs.WatchSessionEvents(operator, &indexerv1.WatchSessionEventsRequest{})
		if err != nil {
			return err
		}
		m, err := w.Recv()
		if err != nil {
			return err
		}
		for _, st := range m.GetStates() {
			digest = st.GetSessionDigest()
		}
		if digest == "" {
			return errors.New("no session state in the snapshot yet")
		}
		return nil
	})

	client := withToken(ctx, clientToken)
	expires := timestamppb.New(time.Now().Add(time.Hour))
	refused := map[string]func() error{
		"WatchSessionEvents": func() error {
			w, err := cs.WatchSessionEvents(client, &indexerv1.WatchSessionEventsRequest{ReplicaId: "any-gateway"})
			if err == nil {
				_, err = w.Recv()
			}
			return err
		},
		"RevokeSession": func() error {
			_, err := cs.RevokeSession(client, &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: expires})
			return err
		},
		"CheckSession": func() error {
			_, err := cs.CheckSession(client, &indexerv1.CheckSessionRequest{SessionDigest: digest})
			return err
		},
		"WatchRevocations": func() error {
			w, err := cs.WatchRevocations(client, &indexerv1.WatchRevocationsRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			return err
		},
		"ConsumeRequestState": func() error {
			_, err := cs.ConsumeRequestState(client, &indexerv1.ConsumeRequestStateRequest{StateDigest: digest, ExpiresAt: expires})
			return err
		},
		"WatchToolDefinitions": func() error {
			w, err := cs.WatchToolDefinitions(client, &indexerv1.WatchToolDefinitionsRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			return err
		},
		"RecordToolDefinitions": func() error {
			_, err := cs.RecordToolDefinitions(client, &indexerv1.RecordToolDefinitionsRequest{})
			return err
		},
	}
	for name, call := range refused {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s from an internal client: %s, want PERMISSION_DENIED", name, describe(err))
		}
	}
	if r, err := cs.CheckSession(operator, &indexerv1.CheckSessionRequest{SessionDigest: digest}); err != nil || r.GetRevoked() {
		t.Errorf("the user's session after the internal client's RevokeSession: revoked %v, %s; want it not revoked", r.GetRevoked(), describe(err))
	}
	if _, err := cs.ListTasks(client, &indexerv1.ListTasksRequest{Owner: reportingSubject}); err != nil {
		t.Errorf("ListTasks of the internal client's own tasks: %s, want OK", describe(err))
	}
}
