package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// eventSink hands the events written to it to the test.
type eventSink struct{ events chan audit.Event }

func (s eventSink) Name() string { return "test" }
func (s eventSink) Close() error { return nil }
func (s eventSink) Write(_ context.Context, batch []audit.Event) error {
	for _, e := range batch {
		s.events <- e
	}
	return nil
}

// A rejected reload is logged and audited naming the key and the
// environment variable, never the value the variable expanded to, whether
// the decoding refused it (a duration, a number) or the validation (a
// mode, a rate, a URL).
func TestRejectedReloadShowsNoExpandedValue(t *testing.T) {
	const secret = "s3cr3t-VALUE-xyz"
	t.Setenv("SWITCHBOARD_TEST_RELOAD_SECRET", secret)
	base := "reload: {interval: 100ms}\ngateway:\n  aggregator: {address: \"127.0.0.1:1\", token: t}\n"
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	cfg, err := config.Parse(raw, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan audit.Event, 16)
	w, err := audit.New(audit.Options{Service: "gateway", Sinks: []audit.Sink{eventSink{events}}, FlushEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var log testkit.LogBuffer
	env := Env{Service: "gateway", Config: cfg, Log: slog.New(slog.NewTextHandler(&log, nil)), ConfigPath: path, configRaw: raw}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		env.WatchConfig(ctx, nil, Reloader{
			// The gateway's validation, and the rate limits it does not
			// read, checked by a function that names no variable itself.
			Validate: func(c *config.Config) error { return errors.Join(c.ValidateGateway(), c.RateLimits.Validate()) },
			Apply:    func(*config.Config) error { return nil },
			Audit:    w,
		})
		close(done)
	}()
	defer func() { cancel(); <-done }()

	for _, bad := range []struct{ name, add, key string }{
		{"a duration", "grpc: {keepaliveTime: \"${SWITCHBOARD_TEST_RELOAD_SECRET}\"}\n", "grpc.keepaliveTime"},
		{"a number", "audit: {queueSize: \"${SWITCHBOARD_TEST_RELOAD_SECRET}\"}\n", "audit.queueSize"},
		{"a mode", "audit: {sink: \"${SWITCHBOARD_TEST_RELOAD_SECRET}\"}\n", "audit.sink"},
		{"a rate", "rateLimits:\n  limits:\n  - {name: calls, per: principal, rate: \"${SWITCHBOARD_TEST_RELOAD_SECRET}/s\"}\n", "rateLimits.limits[0].rate"},
		{"a URL", "gateway:\n  aggregator: {address: \"127.0.0.1:1\", token: t}\n  publicURL: \"https://u:${SWITCHBOARD_TEST_RELOAD_SECRET}@%zz\"\n", "gateway.publicURL"},
	} {
		content := base + bad.add
		if strings.HasPrefix(bad.add, "gateway:") {
			content = "reload: {interval: 100ms}\n" + bad.add
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		var e audit.Event
		select {
		case e = <-events:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no config_reload event; log:\n%s", bad.name, log.String())
		}
		if e.Kind != audit.KindConfigReload || e.Outcome != audit.OutcomeRejected {
			t.Fatalf("%s: event %+v, want a rejected config_reload", bad.name, e)
		}
		if strings.Contains(e.Detail, "s3cr3t") {
			t.Errorf("%s: the audit event shows the value: %s", bad.name, e.Detail)
		}
		if !strings.Contains(e.Detail, bad.key) || !strings.Contains(e.Detail, "${SWITCHBOARD_TEST_RELOAD_SECRET}") {
			t.Errorf("%s: the audit event does not name %s and the variable: %s", bad.name, bad.key, e.Detail)
		}
	}
	logged := log.String()
	if n := strings.Count(logged, "configuration reload rejected"); n != 5 {
		t.Errorf("%d rejections logged, want 5:\n%s", n, logged)
	}
	if strings.Contains(logged, "s3cr3t") {
		t.Errorf("the log shows the value:\n%s", logged)
	}
	if !strings.Contains(logged, "${SWITCHBOARD_TEST_RELOAD_SECRET}") {
		t.Errorf("the log does not name the variable:\n%s", logged)
	}
}
