package methods

import (
	"slices"
	"testing"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// TestMissedWhileReopening: after a watch is reopened, the tools are
// announced only if the caller's tools digest changed (or is unknown).
func TestMissedWhileReopening(t *testing.T) {
	watch := func(before, first string) (*catalogWatch, *catalogWatch) {
		return &catalogWatch{toolsDigest: before}, &catalogWatch{first: &aggregatorv1.WatchCatalogResponse{ToolsDigest: first}}
	}
	tools := aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS
	for _, tc := range []struct {
		before, after string
		wantTools     bool
	}{
		{"d1", "d1", false},
		{"d1", "d2", true},
		{"", "d1", true},
		{"", "", true},
	} {
		b, a := watch(tc.before, tc.after)
		ev := missedWhileReopening(b, a)
		if got := slices.Contains(ev.GetChanged(), tools); got != tc.wantTools {
			t.Errorf("digest %q → %q: tools announced %v, want %v", tc.before, tc.after, got, tc.wantTools)
		}
		if len(ev.GetChanged()) < 2 {
			t.Errorf("digest %q → %q: resources and prompts must always be announced, got %v", tc.before, tc.after, ev.GetChanged())
		}
	}
}

// TestNothingMissedAtTheSameVersion: a watch reopened at the catalog
// version last seen announces nothing (versions are content-derived); at
// another version it announces as above.
func TestNothingMissedAtTheSameVersion(t *testing.T) {
	before := &catalogWatch{toolsDigest: "d1", version: 7, versionSeen: true}
	same := &catalogWatch{first: &aggregatorv1.WatchCatalogResponse{CatalogVersion: 7, ToolsDigest: "d1"}}
	if ev := missedWhileReopening(before, same); len(ev.GetChanged()) != 0 {
		t.Fatalf("reopened at the same version: announced %v", ev.GetChanged())
	}
	other := &catalogWatch{first: &aggregatorv1.WatchCatalogResponse{CatalogVersion: 8, ToolsDigest: "d1"}}
	if ev := missedWhileReopening(before, other); len(ev.GetChanged()) != 2 {
		t.Fatalf("reopened at another version: announced %v, want resources and prompts", ev.GetChanged())
	}
}

// TestPolicyChangeOfResourcesSeenWhileReopening: a watch reopened at the
// same version and tools, but another view (a policy that changed only
// the caller's resources or prompts), announces resources and prompts;
// it once announced nothing, and the client's cached lists stayed stale.
func TestPolicyChangeOfResourcesSeenWhileReopening(t *testing.T) {
	before := &catalogWatch{toolsDigest: "d1", viewDigest: "v1", version: 7, versionSeen: true}
	same := &catalogWatch{first: &aggregatorv1.WatchCatalogResponse{CatalogVersion: 7, ToolsDigest: "d1", ViewDigest: "v1"}}
	if ev := missedWhileReopening(before, same); len(ev.GetChanged()) != 0 {
		t.Fatalf("the same view: announced %v", ev.GetChanged())
	}
	other := &catalogWatch{first: &aggregatorv1.WatchCatalogResponse{CatalogVersion: 7, ToolsDigest: "d1", ViewDigest: "v2"}}
	ev := missedWhileReopening(before, other)
	if len(ev.GetChanged()) != 2 || slices.Contains(ev.GetChanged(), aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS) {
		t.Fatalf("another view of resources or prompts: announced %v, want resources and prompts", ev.GetChanged())
	}
}
