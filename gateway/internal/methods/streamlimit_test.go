package methods

import (
	"net/http"
	"testing"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// TestStreamLimits: a principal gets at most its share, all together at
// most the total, and a released place (once, however often release is
// called) can be taken again.
func TestStreamLimits(t *testing.T) {
	l := newStreamLimits(2, 3)
	alice, bob := &commonv1.Principal{Subject: "alice"}, &commonv1.Principal{Subject: "bob"}
	var releases []func()
	for range 2 {
		release, rerr := l.acquire(alice)
		if rerr != nil {
			t.Fatal(rerr)
		}
		releases = append(releases, release)
	}
	if _, rerr := l.acquire(alice); rerr == nil || rerr.ModernStatus() != http.StatusTooManyRequests {
		t.Fatalf("alice's third stream: %v", rerr)
	}
	release, rerr := l.acquire(bob)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := l.acquire(bob); rerr == nil {
		t.Fatal("a fourth stream past the total of 3")
	}
	release()
	release()
	if _, rerr := l.acquire(&commonv1.Principal{Subject: "carol"}); rerr != nil {
		t.Fatalf("after a release: %v", rerr)
	}
	if _, rerr := l.acquire(bob); rerr == nil {
		t.Fatal("a release counted twice")
	}
	releases[0]()
	if _, rerr := l.acquire(alice); rerr != nil {
		t.Fatalf("alice after her release: %v", rerr)
	}
	if len(l.byPrincipal) != 2 {
		t.Fatalf("principals tracked: %v", l.byPrincipal)
	}
}
