package codemode

import "testing"

// TestIdentifiers: the names a program uses, not its strings; none for a
// program that does not parse.
func TestIdentifiers(t *testing.T) {
	got := Identifiers("x = weather_forecast(city=\"Oslo\")\nresult = x[\"highC\"]\n")
	for _, name := range []string{"weather_forecast", "x", "result"} {
		if !got[name] {
			t.Errorf("Identifiers lacks %q: %v", name, got)
		}
	}
	if got["Oslo"] {
		t.Errorf("Identifiers took a string: %v", got)
	}
	if got := Identifiers("result = (\n"); got != nil {
		t.Errorf("a program that does not parse: %v", got)
	}
}
