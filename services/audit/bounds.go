package audit

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// The bounds of one event in the audit table: the indexer's
// RecordAuditEvents refuses a request holding an event past them, and
// the indexer sink fits every event within them first (Fit), so that one
// principal's long subject or many groups cannot cost every other
// principal's events their batch.
const (
	// MaxFieldBytes bounds each text field (subject, tool, detail, ...).
	MaxFieldBytes = 1024
	// MaxGroups bounds the groups recorded of a principal.
	MaxGroups = 64
	// MaxGroupBytes bounds each group.
	MaxGroupBytes = 256
	// MaxArgumentsBytes bounds the redacted arguments (audit.arguments:
	// values); their digest is always recorded.
	MaxArgumentsBytes = 16 << 10
)

// Fit returns e within the table's bounds: text cut at a character
// boundary with invalid UTF-8 and NUL replaced, the groups past MaxGroups
// left out, arguments past MaxArgumentsBytes left out (their digest
// stays). Detail says what was cut, so the record does not pass for whole.
func Fit(e Event) Event {
	var cut []string
	for _, f := range []struct {
		name string
		v    *string
	}{{"subject", &e.Subject}, {"server", &e.Server}, {"tool", &e.Tool}, {"resource", &e.Resource}, {"prompt", &e.Prompt},
		{"backend", &e.Backend}, {"trace_id", &e.TraceID}, {"session", &e.Session}, {"arguments_sha256", &e.ArgumentsSHA256},
		{"caller", &e.Caller}, {"service", &e.Service}} {
		if fitted := fitText(*f.v, MaxFieldBytes); fitted != *f.v {
			*f.v = fitted
			cut = append(cut, f.name)
		}
	}
	if len(e.Groups) > 0 {
		groups := e.Groups[:min(len(e.Groups), MaxGroups)]
		fitted := make([]string, len(groups))
		for i, g := range groups {
			fitted[i] = fitText(g, MaxGroupBytes)
		}
		if len(e.Groups) > MaxGroups {
			cut = append(cut, fmt.Sprintf("groups (%d of %d kept)", MaxGroups, len(e.Groups)))
		}
		e.Groups = fitted
	}
	if len(e.Arguments) > MaxArgumentsBytes || (len(e.Arguments) > 0 && !utf8.Valid(e.Arguments)) {
		e.Arguments = nil
		cut = append(cut, "arguments (their digest kept)")
	}
	detail := e.Detail
	if len(cut) > 0 {
		note := "cut to the audit table's bounds: " + strings.Join(cut, ", ")
		if detail != "" {
			note = detail + "; " + note
		}
		detail = note
	}
	e.Detail = fitText(detail, MaxFieldBytes)
	return e
}

// fitText is s as valid UTF-8 without NUL, at most n bytes, cut at a
// character boundary. A cut text is a copy: an event queued with it does
// not keep the client's whole string (a megabyte of tool name) alive.
func fitText(s string, n int) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && len(s) <= n {
		return s
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= n {
		return s
	}
	return strings.Clone(textcut.Prefix(s, n))
}
