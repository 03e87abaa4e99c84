package config

import (
	"log/slog"
	"strings"
	"testing"
)

// TestLoggingIsValidated: logging.level is debug, info, warn or error and
// logging.format json or text. Another value is refused by every service,
// naming its key, rather than silently logged at info, as json.
func TestLoggingIsValidated(t *testing.T) {
	lookup := env(map[string]string{"GW": "gw-token", "IDX": "idx-token", "AGG": "agg-token", "ALICE_KEY": "alice-key-0123456789"})
	for key, section := range map[string]string{
		"logging.level":  "logging: {level: verbose}\n",
		"logging.format": "logging: {format: yaml}\n",
	} {
		c, err := Parse([]byte(shortConfig(t)+section), lookup)
		if err != nil {
			t.Fatal(err)
		}
		for service, err := range map[string]error{"gateway": c.ValidateGateway(), "aggregator": c.ValidateAggregator(), "indexer": c.ValidateIndexer()} {
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("%q: the %s's validation: %v, want an error naming %s", section, service, err, key)
			}
		}
	}
	for l, want := range map[Logging]slog.Level{{}: slog.LevelInfo, {Level: "DEBUG"}: slog.LevelDebug, {Level: "warning"}: slog.LevelWarn, {Level: "error", Format: "Text"}: slog.LevelError} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
		if got := l.SlogLevel(); got != want {
			t.Errorf("%+v: level %v, want %v", l, got, want)
		}
	}
}
