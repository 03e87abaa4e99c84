package isolation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	monitorToken   = "monitor-token-not-an-operator"
	reportingToken = "reporting-token-not-an-operator"
	listBackends   = "switchboard.aggregator.v1.AggregatorService/ListBackends"
)

// TestListBackendsRedactedForNonOperators: ListBackends tells a caller
// that is not an operator how each backend is doing only as a generic
// reason, never the failure's text (which carries URLs, hosts and ports),
// and no URL; an operator's credential sees both, still without secrets.
func TestListBackendsRedactedForNonOperators(t *testing.T) {
	unreachable := harness.FreeAddr(t) // nothing listens there
	s := startRedirectStack(t, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, config.Backend{Name: "down", URL: "http://" + unreachable + "/mcp?key=" + urlSecret,
			Timeout: config.Duration(5 * time.Second)})
		cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
			// A trusted service that is no operator: it sees every backend.
			config.ServiceCredential{Name: "monitor", Token: monitorToken, AssertPrincipals: true, Allow: []string{listBackends}},
			// An internal client: it sees the backends of its view.
			config.ServiceCredential{Name: "reporting", Token: reportingToken, Subject: "reporting", Allow: []string{listBackends}},
		)
	})
	aggAddr := s.cluster.Config.Aggregator.Listen
	operator := aggregatorAs(t, aggAddr, s.cluster.OperatorToken)
	failing := []string{"down"}
	for _, code := range crossCodes {
		failing = append(failing, fmt.Sprintf("cross%d", code))
	}
	testkit.Eventually(t, "every failing backend reported", svcDeadline, func() error {
		resp, err := operator.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
		if err != nil {
			return err
		}
		for _, b := range resp.GetBackends() {
			for _, name := range failing {
				if b.GetName() == name && b.GetLastError() == "" {
					return fmt.Errorf("%s has no error yet", name)
				}
			}
		}
		return nil
	})

	hosts := []string{strings.TrimPrefix(s.origin, "http://"), strings.TrimPrefix(s.other, "http://"), unreachable, "127.0.0.1", "http:", "/mcp"}
	t.Run("operator", func(t *testing.T) {
		resp, err := operator.ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range resp.GetBackends() {
			for _, secret := range s.secrets() {
				if strings.Contains(b.GetLastError()+b.GetUrl(), secret) {
					t.Errorf("%s: %q / %q shows %q", b.GetName(), b.GetLastError(), b.GetUrl(), secret)
				}
			}
			if b.GetUrl() == "" {
				t.Errorf("%s: the operator gets no URL", b.GetName())
			}
			if b.GetName() == "down" && !strings.Contains(b.GetLastError(), unreachable) {
				t.Errorf("down: the operator's error %q does not say where the backend was not found", b.GetLastError())
			}
		}
	})

	for _, caller := range []struct{ name, token string }{{"trusted service", monitorToken}, {"internal client", reportingToken}} {
		t.Run(caller.name, func(t *testing.T) {
			resp, err := aggregatorAs(t, aggAddr, caller.token).ListBackends(callCtx(t), &aggregatorv1.ListBackendsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetBackends()) == 0 {
				t.Fatal("no backends listed")
			}
			for _, b := range resp.GetBackends() {
				if b.GetUrl() != "" {
					t.Errorf("%s: URL %q shown to a caller that is not an operator", b.GetName(), b.GetUrl())
				}
				for _, leak := range append(s.secrets(), hosts...) {
					if strings.Contains(b.GetLastError(), leak) {
						t.Errorf("%s: error %q shows %q to a caller that is not an operator", b.GetName(), b.GetLastError(), leak)
					}
				}
			}
			if caller.token != monitorToken {
				return
			}
			want := map[string]string{"down": "unreachable", "cross307": "redirect"}
			for _, b := range resp.GetBackends() {
				if w, ok := want[b.GetName()]; ok && !strings.Contains(b.GetLastError(), w) {
					t.Errorf("%s: generic reason %q does not say %q", b.GetName(), b.GetLastError(), w)
				}
				delete(want, b.GetName())
			}
			if len(want) > 0 {
				t.Errorf("backends missing from a trusted service's list: %v", want)
			}
		})
	}
}

// digestOf is a session digest as the gateway writes it.
func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// revocationMargin is how long past the expiry it is given the indexer
// keeps a revocation, and counts it against its caller's bound: its
// allowance for a gateway's clock running behind.
const revocationMargin = 5 * time.Minute

// TestRevokeSessionBounded: a revocation expires no later than a session
// lives (an expiry further ahead is clamped), a caller that is not an
// operator holds at most indexer.maxRevocationsPerCaller live revocations
// (expired ones free their place), and expired revocations are collected
// from the database.
func TestRevokeSessionBounded(t *testing.T) {
	const perCaller = 5
	sessionTTL := time.Hour
	c := harness.Start(t, harness.Options{Configure: func(cfg *config.Config) {
		cfg.Gateway.Sessions.TTL = config.Duration(sessionTTL)
		cfg.Indexer.MaxRevocationsPerCaller = perCaller
		cfg.Indexer.GCInterval = config.Duration(time.Second)
	}})
	idxAddr := c.Config.Indexer.Listen
	gateway := indexerAs(t, idxAddr, c.GatewayToken)
	revoke := func(idx indexerv1.IndexerServiceClient, digest string, expires time.Time) error {
		_, err := idx.RevokeSession(callCtx(t), &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: timestamppb.New(expires)})
		return err
	}
	var ready error
	testkit.Eventually(t, "the indexer takes revocations", svcDeadline, func() error {
		ready = revoke(gateway, digestOf("far"), time.Now().Add(365*24*time.Hour))
		if status.Code(ready) == codes.Unavailable {
			return ready
		}
		return nil
	})
	if ready != nil {
		t.Fatalf("a revocation expiring in a year: %v, want it taken and clamped", ready)
	}

	t.Run("clamped to the session TTL", func(t *testing.T) {
		stream, err := gateway.WatchRevocations(callCtx(t), &indexerv1.WatchRevocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range msg.GetRevocations() {
				if r.GetSessionDigest() != digestOf("far") {
					continue
				}
				// The TTL, the clamp's allowance for clock skew, the
				// margin kept past the expiry, and the test's own time.
				latest := time.Now().Add(sessionTTL + 5*time.Minute + revocationMargin + 10*time.Second)
				if at := r.GetExpiresAt().AsTime(); at.After(latest) || at.Before(time.Now().Add(sessionTTL)) {
					t.Errorf("revocation expires at %s, want within the session TTL (%s) and clock skew from now", at, sessionTTL)
				}
				return
			}
			if msg.GetSnapshotComplete() {
				t.Fatal("the revocation is not in the snapshot")
			}
		}
	})

	t.Run("per caller", func(t *testing.T) {
		var short []string
		for i := range perCaller - 1 {
			d := digestOf(fmt.Sprint("short-", i))
			short = append(short, d)
			// Kept revocationMargin past the expiry asked, so 3 s from
			// now: an expiry the margin ago less 3 s.
			if err := revoke(gateway, d, time.Now().Add(3*time.Second-revocationMargin)); err != nil {
				t.Fatalf("revocation %d of %d: %v", i+2, perCaller, err)
			}
		}
		over := digestOf("one too many")
		if err := revoke(gateway, over, time.Now().Add(time.Hour)); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("revocation %d of a caller allowed %d: %v, want RESOURCE_EXHAUSTED", perCaller+1, perCaller, err)
		}
		if err := revoke(indexerAs(t, idxAddr, c.OperatorToken), digestOf("operator"), time.Now().Add(time.Hour)); err != nil {
			t.Errorf("an operator's revocation past the gateway's bound: %v", err)
		}
		// Expired revocations free their place.
		testkit.Eventually(t, "a place freed by expiry", svcDeadline, func() error { return revoke(gateway, over, time.Now().Add(time.Hour)) })

		// And they are collected from the database.
		conn, err := pgx.Connect(t.Context(), c.Config.Indexer.Database)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		testkit.Eventually(t, "expired revocations collected", svcDeadline, func() error {
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM revoked_sessions WHERE session_digest = ANY($1)`, short).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%d expired revocations still stored", n)
			}
			return nil
		})
	})
}
