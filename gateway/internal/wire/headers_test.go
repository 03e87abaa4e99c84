package wire

import (
	"net/http"
	"testing"
)

// An Accept header gives each media type the quality of its most
// specific range, and quality 0 refuses it: application/json;q=0 was once
// taken as accepting JSON.
func TestAcceptReadsQualities(t *testing.T) {
	for accept, want := range map[string][2]bool{
		"application/json, text/event-stream":             {true, true},
		"application/json;q=0.5, text/event-stream;q=0.1": {true, true},
		"*/*": {true, true},
		"application/json;q=0, text/event-stream": {false, true},
		"application/json, text/event-stream;q=0": {true, false},
		"*/*;q=0":                                            {false, false},
		"*/*, application/json;q=0":                          {false, true},
		"application/*;q=0, application/json":                {true, false},
		"text/*, application/json;q=0.000":                   {false, true},
		"application/json;q=0, application/json;q=1, text/*": {true, true},
		// Qualities that are not ones are ignored.
		"application/json;q=NaN, text/event-stream;q=-1":  {true, true},
		"application/json;q=abc, text/event-stream;q=1.5": {true, true},
	} {
		h := http.Header{"Accept": {accept}}
		json, sse := accepts(h)
		if json != want[0] || sse != want[1] {
			t.Errorf("Accept %q: JSON %v, SSE %v; want %v, %v", accept, json, sse, want[0], want[1])
		}
	}
}
