package rawjson

import (
	"encoding/json"
	"testing"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " back \ slash`, "ctl \x00\x01\x1f\n\r\t", "<html>&", "Zürich ✓", "bad \xff utf8", "sep \u2028 \u2029"} {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}
