package audit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// Fit leaves an event within the bounds as it is, and cuts one past them
// to what the indexer's table takes, saying what it cut.
func TestFit(t *testing.T) {
	within := Event{Service: "gateway", Kind: KindToolCall, Outcome: OutcomeOK, Subject: "alice", Groups: []string{"eng"},
		Tool: "alpha_echo", Detail: "fine", Arguments: []byte(`{"text":"x"}`)}
	if got := Fit(within); !reflect.DeepEqual(got, within) {
		t.Fatalf("an event within the bounds changed: %+v", got)
	}

	groups := make([]string, 100)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-%03d", i)
	}
	groups[0] = strings.Repeat("g", 300)
	// A subject whose cut falls inside a three-byte character, with a NUL
	// and a byte that is not UTF-8.
	subject := strings.Repeat("a", MaxFieldBytes-1) + "€" + "tail"
	over := Event{Service: "gateway", Kind: KindToolCall, Outcome: OutcomeOK, Subject: subject, Groups: groups,
		Tool: "bad\x00name\xff", Detail: "denied", Arguments: []byte(`"` + strings.Repeat("v", MaxArgumentsBytes) + `"`), ArgumentsSHA256: "abc"}
	got := Fit(over)
	if len(got.Subject) > MaxFieldBytes || !utf8.ValidString(got.Subject) || got.Subject != strings.Repeat("a", MaxFieldBytes-1) {
		t.Errorf("subject not cut at the character boundary: %d bytes, valid %v", len(got.Subject), utf8.ValidString(got.Subject))
	}
	if got.Tool != "bad\uFFFDname\uFFFD" {
		t.Errorf("tool %q: NUL and invalid bytes not replaced", got.Tool)
	}
	if len(got.Groups) != MaxGroups || got.Groups[1] != "group-001" || len(got.Groups[0]) != MaxGroupBytes {
		t.Errorf("groups: %d kept, first %d bytes", len(got.Groups), len(got.Groups[0]))
	}
	if got.Arguments != nil || got.ArgumentsSHA256 != "abc" {
		t.Errorf("arguments past the bound kept (%d bytes) or digest lost (%q)", len(got.Arguments), got.ArgumentsSHA256)
	}
	for _, want := range []string{"denied; cut to the audit table's bounds", "subject", "tool", "groups (64 of 100 kept)", "arguments (their digest kept)"} {
		if !strings.Contains(got.Detail, want) {
			t.Errorf("detail %q lacks %q", got.Detail, want)
		}
	}
	if len(over.Groups) != 100 || over.Subject != subject {
		t.Error("Fit changed the event it was given")
	}
}

// A text Fit cuts is a copy: an event kept in the writer's queue does not
// hold the client's whole string alive (a megabyte of tool name for a
// kilobyte recorded).
func TestFitCopiesWhatItCuts(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	got := Fit(Event{Tool: long, Detail: long})
	for name, cut := range map[string]string{"tool": got.Tool, "detail": got.Detail} {
		if len(cut) > MaxFieldBytes {
			t.Fatalf("%s: %d bytes", name, len(cut))
		}
		start, end := unsafe.StringData(long), unsafe.Add(unsafe.Pointer(unsafe.StringData(long)), len(long))
		if p := unsafe.Pointer(unsafe.StringData(cut)); uintptr(p) >= uintptr(unsafe.Pointer(start)) && uintptr(p) < uintptr(end) {
			t.Errorf("the cut %s shares the original's memory", name)
		}
	}
}
