package config

import (
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
