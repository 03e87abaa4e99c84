package server

import (
	"encoding/json"
	"testing"
)

// A read's ui:// contents are named in their backend's namespace however
// the backend spells them in JSON: an escaped URI once passed a look at
// the answer's text for "ui://" and reached the client as another
// backend's page.
func TestContentsUnderReadsEscapedURIs(t *testing.T) {
	for _, raw := range []string{
		`{"contents":[{"uri":"ui://app/index.html","text":"x"}]}`,
		`{"contents":[{"uri":"ui:\/\/app\/index.html","text":"x"}]}`,
		`{"contents":[{"uri":"\u0075i://app/index.html","text":"x"}]}`,
		`{"contents":[{"uri":"UI://app/index.html","text":"x"}]}`,
	} {
		out := contentsUnder([]byte(raw), "maps", "file:///notes.txt", "file:///notes.txt")
		var res struct{ Contents []struct{ URI string } }
		if out == nil || json.Unmarshal(out, &res) != nil || len(res.Contents) != 1 || res.Contents[0].URI != "ui://maps/app/index.html" {
			t.Errorf("%s became %s", raw, out)
		}
	}
	// Nothing to rename: nil, and the answer passes as it is.
	if out := contentsUnder([]byte(`{"contents":[{"uri":"file:///notes.txt","text":"x"}]}`), "maps", "file:///notes.txt", "file:///notes.txt"); out != nil {
		t.Errorf("an answer needing no change became %s", out)
	}
}
