package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// pager serves pages from a cursor → (items, next) table.
func pager(pages map[string]struct {
	items []int
	next  string
}) func(context.Context, string) ([]int, string, error) {
	return func(_ context.Context, cur string) ([]int, string, error) {
		p, ok := pages[cur]
		if !ok {
			return nil, "", fmt.Errorf("unknown cursor %q", cur)
		}
		return p.items, p.next, nil
	}
}

type page = struct {
	items []int
	next  string
}

func TestCollectFollowsCursorsToTheEnd(t *testing.T) {
	got, err := collect(context.Background(), "tools", pager(map[string]page{
		"":   {[]int{1, 2}, "c1"},
		"c1": {nil, "c2"}, // an empty page in the middle is not the end
		"c2": {[]int{3}, ""},
	}))
	if err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("collect = %v, %v", got, err)
	}
}

func TestCollectRefusesCursorCycles(t *testing.T) {
	_, err := collect(context.Background(), "tools", pager(map[string]page{
		"":  {[]int{1}, "a"},
		"a": {[]int{2}, "b"},
		"b": {[]int{3}, "a"},
	}))
	if !errors.Is(err, errCursorLoop) {
		t.Fatalf("err = %v, want a cursor loop", err)
	}
}

func TestCollectCapsPages(t *testing.T) {
	calls := 0
	_, err := collect(context.Background(), "tools", func(_ context.Context, cur string) ([]int, string, error) {
		calls++
		return []int{calls}, fmt.Sprint("page-", calls), nil // never ends, never repeats
	})
	if !errors.Is(err, errCursorLoop) || calls != MaxListPages {
		t.Fatalf("err = %v after %d pages, want a loop error after %d", err, calls, MaxListPages)
	}
}

// newTestClient is New of c with what it leaves unset at the defaults the
// aggregator's configuration gives a backend at load
// (config.Backend.WithDefaults): protocol auto, the timeout and input
// wait, and the token cache bounds of its auth mode.
func newTestClient(c Config) *Client { return newTestClientLogging(c, nil) }

// newTestClientLogging is newTestClient logging to log (nil: the default
// logger).
func newTestClientLogging(c Config, log *slog.Logger) *Client {
	d := config.Backend{Protocol: c.Protocol, Timeout: config.Duration(c.Timeout), InputWait: config.Duration(c.InputWait),
		Auth: config.BackendAuth{Mode: c.Auth.Mode, CacheEntries: c.Auth.CacheEntries, RefreshBefore: config.Duration(c.Auth.RefreshBefore)}}.WithDefaults()
	c.Protocol, c.Timeout, c.InputWait = d.Protocol, time.Duration(d.Timeout), time.Duration(d.InputWait)
	c.Auth.CacheEntries, c.Auth.RefreshBefore = d.Auth.CacheEntries, time.Duration(d.Auth.RefreshBefore)
	return New(c, nil, log)
}

func TestHealthStates(t *testing.T) {
	var changes []string
	c := newTestClient(Config{Name: "a", URL: "http://127.0.0.1:1"})
	c.SetHealthPolicy(HealthPolicy{DegradedAfter: time.Second, UnhealthyAfter: 2}, func(prev, now State, _ bool) {
		changes = append(changes, prev.String()+">"+now.String())
	})
	c.health.success(time.Millisecond, nil)
	c.health.success(2*time.Second, nil)
	c.health.failure("boom", FailureUnavailable)
	if s := c.Status(); s.State != Degraded || s.LastError != "boom" {
		t.Fatalf("after one failure: %+v", s)
	}
	c.health.failure("boom again", FailureUnavailable)
	c.health.success(time.Millisecond, &Lists{ProtocolVersion: ProtocolModern})
	want := []string{"unknown>healthy", "healthy>degraded", "degraded>unhealthy", "unhealthy>healthy"}
	if !slices.Equal(changes, want) {
		t.Fatalf("transitions %v, want %v", changes, want)
	}
	if s := c.Status(); s.LastError != "" || s.ProtocolVersion != ProtocolModern || s.LastCheck.IsZero() {
		t.Fatalf("after recovery: %+v", s)
	}
}

func TestUnreachableBackendIsUnavailableAndRedacted(t *testing.T) {
	c := newTestClient(Config{Name: "a", URL: "http://user:pa55word@127.0.0.1:1/mcp?token=s3cret", Timeout: 2 * time.Second})
	defer c.Close()
	_, err := c.ListAll(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	for _, secret := range []string{"pa55word", "s3cret"} {
		if msg := err.Error() + c.Status().LastError; strings.Contains(msg, secret) {
			t.Fatalf("error leaks %q: %s", secret, msg)
		}
	}
	// A credential in the user name alone (https://TOKEN@host) is the
	// whole credential: the user information goes as a whole.
	c = newTestClient(Config{Name: "b", URL: "http://tok3n-in-the-user-name@127.0.0.1:1/mcp", Timeout: 2 * time.Second})
	defer c.Close()
	_, err = c.ListAll(context.Background())
	if msg := err.Error() + c.Status().LastError; !errors.Is(err, ErrUnavailable) || strings.Contains(msg, "tok3n") || !strings.Contains(msg, "127.0.0.1") {
		t.Fatalf("a user-name credential: %s", msg)
	}
}
