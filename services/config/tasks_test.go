package config

import (
	"strings"
	"testing"
	"time"
)

// TestTasksDefaults: an empty section is valid at its defaults, and a
// defaultTTL above the default maxTTL raises maxTTL with it.
func TestTasksDefaults(t *testing.T) {
	d := Tasks{}.WithDefaults()
	if time.Duration(d.DefaultTTL) != DefaultTaskTTL || time.Duration(d.MaxTTL) != DefaultTaskMaxTTL ||
		time.Duration(d.PollInterval) != DefaultTaskPollInterval || d.MaxResultBytes != DefaultTaskResultBytes ||
		d.MaxPerPrincipal != DefaultTasksPerPrincipal || d.MaxTasks != DefaultTasks {
		t.Fatalf("defaults: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	long := Tasks{DefaultTTL: Duration(48 * time.Hour)}.WithDefaults()
	if time.Duration(long.MaxTTL) != 48*time.Hour {
		t.Fatalf("maxTTL %s, want the defaultTTL", time.Duration(long.MaxTTL))
	}
	if err := long.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestTaskMaxTTLBelowTheDefaultTTL: a file that sets only maxTTL, below
// the default defaultTTL, is taken with defaultTTL brought down to it (as
// pageSize is to maxPageSize), and a file that sets only defaultTTL, over
// the longest maxTTL, is refused naming defaultTTL: an error never blames
// a key the file does not set.
func TestTaskMaxTTLBelowTheDefaultTTL(t *testing.T) {
	lookup := env(map[string]string{"GW": "gw-token", "IDX": "idx-token", "AGG": "agg-token", "ALICE_KEY": "alice-key-0123456789"})
	parse := func(tasks string) *Config {
		doc := strings.Replace(shortConfig(t), "aggregator:\n", "aggregator:\n  tasks: "+tasks+"\n", 1)
		c, err := Parse([]byte(doc), lookup)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := parse("{maxTTL: 30m}")
	if err := c.ValidateAggregator(); err != nil {
		t.Errorf("maxTTL 30m alone: %v", err)
	}
	if got := time.Duration(c.Aggregator.Tasks.WithDefaults().DefaultTTL); got != 30*time.Minute {
		t.Errorf("maxTTL 30m alone: defaultTTL %s, want 30m", got)
	}
	// blamed is the key the error names; the other is named only when
	// the file sets it too.
	const defaultTTL, maxTTL = "aggregator.tasks.defaultTTL", "aggregator.tasks.maxTTL"
	for tasks, keys := range map[string]struct{ blamed, notBlamed string }{
		"{defaultTTL: 200h}":             {defaultTTL, maxTTL},
		"{defaultTTL: 2h, maxTTL: 1h}":   {defaultTTL, ""},
		"{maxTTL: 200h}":                 {maxTTL, defaultTTL},
		"{defaultTTL: 1h, maxTTL: 200h}": {maxTTL, ""},
	} {
		err := parse(tasks).ValidateAggregator()
		if err == nil || !strings.Contains(err.Error(), keys.blamed) {
			t.Errorf("%s: %v, want %s refused", tasks, err, keys.blamed)
		}
		if err != nil && keys.notBlamed != "" && strings.Contains(err.Error(), keys.notBlamed) {
			t.Errorf("%s: %v: blames %s, which the file does not set", tasks, err, keys.notBlamed)
		}
	}
}
