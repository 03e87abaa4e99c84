package mcpspec

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestInputNeedsAndDeclares(t *testing.T) {
	for _, c := range []struct {
		method, params string
		needs          []string
	}{
		{"elicitation/create", `{"message":"ok?"}`, []string{"elicitation.form"}},
		{"elicitation/create", `{"mode":"form"}`, []string{"elicitation.form"}},
		{"elicitation/create", `{"mode":"url","url":"https://example.com"}`, []string{"elicitation.url"}},
		{"sampling/createMessage", `{"messages":[]}`, []string{"sampling"}},
		{"sampling/createMessage", `{"tools":[],"includeContext":"allServers"}`, []string{"sampling", "sampling.tools", "sampling.context"}},
		{"sampling/createMessage", `{"tools":null,"includeContext":"none"}`, []string{"sampling"}},
		{"elicitation/create", `{"mode":"\u0075rl"}`, []string{"elicitation.url"}},
		{"elicitation/create", `{"mode":"\u0066orm"}`, []string{"elicitation.form"}},
		{"elicitation/create", `{"mode":"something new"}`, []string{"elicitation.url"}},
		{"sampling/createMessage", `{"includeContext":"\u0061llServers"}`, []string{"sampling", "sampling.context"}},
		{"roots/list", `{}`, []string{"roots"}},
		{"tools/call", `{}`, nil},
	} {
		if got := InputNeeds(c.method, json.RawMessage(c.params)); !slices.Equal(got, c.needs) {
			t.Errorf("InputNeeds(%s, %s) = %v, want %v", c.method, c.params, got, c.needs)
		}
	}
	for _, c := range []struct {
		caps, path string
		want       bool
	}{
		{`{"elicitation":{}}`, "elicitation.form", true},
		{`{"elicitation":{"form":{}}}`, "elicitation.form", true},
		{`{"elicitation":{"url":{}}}`, "elicitation.form", false},
		{`{"elicitation":{}}`, "elicitation.url", false},
		{`{"elicitation":{"form":{},"url":{}}}`, "elicitation.url", true},
		{`{"elicitation":null}`, "elicitation.form", false},
		{`{"elicitation":{"url":null}}`, "elicitation.url", false},
		{`{"sampling":{}}`, "sampling", true},
		{`{"sampling":{}}`, "sampling.tools", false},
		{`{"sampling":{"tools":{},"context":{}}}`, "sampling.context", true},
		{`{"elicitation":{"url":{}},"elicitation":{}}`, "elicitation.url", false},
		{`{}`, "roots", false},
		{`not json`, "roots", false},
	} {
		if got := Declares(json.RawMessage(c.caps), c.path); got != c.want {
			t.Errorf("Declares(%s, %s) = %v, want %v", c.caps, c.path, got, c.want)
		}
	}
}
