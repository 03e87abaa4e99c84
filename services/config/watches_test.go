package config

import (
	"strings"
	"testing"
)

// aggregator.maxWatchesPerCaller defaults to DefaultMaxWatchesPerCaller
// and is never negative.
func TestMaxWatchesPerCaller(t *testing.T) {
	if got := (Aggregator{}).WithDefaults().MaxWatchesPerCaller; got != DefaultMaxWatchesPerCaller {
		t.Errorf("default %d, want %d", got, DefaultMaxWatchesPerCaller)
	}
	if got := (Aggregator{MaxWatchesPerCaller: 7}).WithDefaults().MaxWatchesPerCaller; got != 7 {
		t.Errorf("set to 7: %d", got)
	}
	err := Aggregator{Listen: ":0", MaxWatchesPerCaller: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "aggregator.maxWatchesPerCaller") {
		t.Errorf("negative: %v", err)
	}
}
