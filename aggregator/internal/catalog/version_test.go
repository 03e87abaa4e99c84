package catalog

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// TestVersionIsContentDerived: two builders that never shared anything
// (two replicas, or one before and after a restart) give the same catalog
// the same version and the same view digests, whatever they built before;
// any change of content changes the version, and no version is 0.
func TestVersionIsContentDerived(t *testing.T) {
	n := mustNaming(t, config.ConflictResolution{})
	replicaA := NewBuilder(n, quiet)
	replicaB := NewBuilder(n, quiet)
	// Replica A has history (another catalog first); replica B starts fresh.
	other := fixture()
	other["backend-01"].Tools[0].Description = "an earlier description"
	first := replicaA.Build(other, nil)
	a := replicaA.Build(fixture(), nil)
	b := replicaB.Build(fixture(), nil)
	if a.Version == 0 || a.Version != b.Version || a.Digest() != b.Digest() {
		t.Fatalf("same catalog, versions %d and %d, digests %s and %s", a.Version, b.Version, a.Digest(), b.Digest())
	}
	if first.Version == a.Version {
		t.Fatalf("two catalogs share version %d", a.Version)
	}
	allow := func(k Kind, key, _ string) bool { return k != KindTools || key < "backend-03" }
	for _, k := range Kinds {
		va, vb := a.View("p", allow), b.View("p", allow)
		if va.Digest(k) != vb.Digest(k) || va.Len(k) != vb.Len(k) {
			t.Fatalf("%s: view digests %s and %s", k, va.Digest(k), vb.Digest(k))
		}
	}

	// Every kind of change moves the version: an item, health, capabilities.
	seen := map[uint64]string{a.Version: "base"}
	for name, lists := range map[string]func() (map[string]*backend.Lists, map[string]bool){
		"description": func() (map[string]*backend.Lists, map[string]bool) {
			l := fixture()
			l["backend-00"].Tools[0].Description = "new"
			return l, nil
		},
		"down": func() (map[string]*backend.Lists, map[string]bool) {
			return fixture(), map[string]bool{"backend-02": true}
		},
		"capabilities": func() (map[string]*backend.Lists, map[string]bool) {
			l := fixture()
			l["backend-00"].Capabilities = &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{Subscribe: true}}
			return l, nil
		},
	} {
		l, down := lists()
		s := NewBuilder(n, quiet).Build(l, down)
		if s.Version == 0 {
			t.Fatalf("%s: version 0", name)
		}
		if prev, dup := seen[s.Version]; dup {
			t.Fatalf("%s: same version %d as %s", name, s.Version, prev)
		}
		seen[s.Version] = name
	}
	if v := versionOf([32]byte{}); v != 1 {
		t.Fatalf("an all-zero digest gives version %d, want 1", v)
	}
}
