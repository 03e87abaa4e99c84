package catalog

import (
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// TestViewCacheHoldsDigestsOfPrincipals: the views are cached by a digest
// of the principal's key, so what a cached view costs does not grow with
// the principal (a principal may be 65 KiB, svcauth's bounds); a principal
// finds its own view again, and another principal gets another.
func TestViewCacheHoldsDigestsOfPrincipals(t *testing.T) {
	s := Build(mustNaming(t, config.ConflictResolution{}), map[string]*backend.Lists{}, nil, quiet)
	long := strings.Repeat("g", 64<<10)
	first := s.View("user:0"+long, nil)
	for i := range 100 {
		s.View("user:"+strconv.Itoa(i)+long, nil)
	}
	if s.View("user:0"+long, nil) != first {
		t.Fatal("a principal did not find its cached view")
	}
	if s.View("user:1"+long, nil) == first {
		t.Fatal("two principals share a view")
	}
	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	bytes := 0
	for k := range s.views.m {
		bytes += len(k)
	}
	if len(s.views.m) != 100 || bytes > 100*viewKeyBytes {
		t.Fatalf("%d views cached under %d bytes of keys, want 100 under at most %d", len(s.views.m), bytes, 100*viewKeyBytes)
	}
}
