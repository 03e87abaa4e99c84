package session

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func TestSealOpen(t *testing.T) {
	alice := &commonv1.Principal{Subject: "alice", Groups: []string{"b", "a"}}
	s, err := NewSealer(key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, claims, err := s.Mint(alice, "", "2025-11-25", json.RawMessage(`{"roots":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(id, "alice") || !strings.HasPrefix(id, sealVersion) {
		t.Fatalf("id %q leaks or lacks its version", id)
	}
	// Another sealer with the same key (another replica) opens it; group
	// order does not matter.
	other, _ := NewSealer(key, time.Hour)
	got, err := other.Open(id, &commonv1.Principal{Subject: "alice", Groups: []string{"a", "b"}})
	if err != nil || got.ProtocolVersion != "2025-11-25" || string(got.ClientCapabilities) != `{"roots":{}}` || got.ExpiresAt != claims.ExpiresAt {
		t.Fatalf("open on another replica: %+v %v", got, err)
	}
	rejected := map[string]func() error{
		"other principal": func() error { _, err := s.Open(id, &commonv1.Principal{Subject: "bob"}); return err },
		"other groups": func() error {
			_, err := s.Open(id, &commonv1.Principal{Subject: "alice", Groups: []string{"a"}})
			return err
		},
		"other key": func() error {
			k, _ := NewSealer("", time.Hour)
			_, err := k.Open(id, alice)
			return err
		},
		"tampered": func() error { _, err := s.Open(id[:len(id)-4]+"AAAA", alice); return err },
		"garbage":  func() error { _, err := s.Open("s1.!!", alice); return err },
		"another spelling": func() error {
			other, ok := respelled(id)
			if !ok {
				return ErrInvalid // checked by TestOneSpelling
			}
			_, err := s.Open(other, alice)
			return err
		},
		"a line break": func() error { _, err := s.Open(id[:10]+"\n"+id[10:], alice); return err },
		"expired": func() error {
			later, _ := NewSealer(key, time.Hour)
			later.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			_, err := later.Open(id, alice)
			return err
		},
	}
	for name, open := range rejected {
		if err := open(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestNewSealerRejectsBadKeys(t *testing.T) {
	for _, k := range []string{"not base64!", "c2hvcnQ="} {
		if _, err := NewSealer(k, time.Hour); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

func TestPrincipalDigestDistinguishes(t *testing.T) {
	a := PrincipalDigest(&commonv1.Principal{Subject: "a|1:b"})
	b := PrincipalDigest(&commonv1.Principal{Subject: "a", Groups: []string{"b"}})
	if a == b {
		t.Fatal("distinct principals share a digest")
	}
}

// respelled is id with an unused low bit of its last base64 character set:
// the same sealed bytes to a lenient decoder. ok is false when the sealed
// length leaves no unused bits.
func respelled(id string) (string, bool) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, sealVersion))
	if err != nil || len(raw)%3 == 0 {
		return "", false
	}
	last := strings.IndexByte(alphabet, id[len(id)-1])
	return id[:len(id)-1] + string(alphabet[last^1]), true
}

// TestOneSpelling: every id opens in the spelling it was minted in and in
// no other, whatever its sealed length.
func TestOneSpelling(t *testing.T) {
	alice := &commonv1.Principal{Subject: "alice"}
	s, _ := NewSealer(key, time.Hour)
	respellable := 0
	// Capabilities of different lengths give every sealed length mod 3.
	for n := range 9 {
		id, _, err := s.Mint(alice, "", "2025-11-25", json.RawMessage(`{"x":"`+strings.Repeat("a", n)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(id, alice); err != nil {
			t.Fatalf("minted id does not open: %v", err)
		}
		other, ok := respelled(id)
		if !ok {
			continue
		}
		respellable++
		if _, err := s.Open(other, alice); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q, another spelling of %q, opened: %v", other, id, err)
		}
	}
	if respellable == 0 {
		t.Fatal("no id had another spelling to try")
	}
}

// An id opened before is not decrypted again, but its principal and its
// expiry are checked on every Open; the ids remembered are bounded.
func TestOpenedIDsStillChecked(t *testing.T) {
	alice := &commonv1.Principal{Subject: "alice"}
	s, err := NewSealer(key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := s.Mint(alice, "", "2025-11-25", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Open(id, alice); err != nil {
			t.Fatal(err)
		}
	}
	if _, remembered := s.opened[id]; !remembered {
		t.Fatal("an opened id is not remembered")
	}
	if _, err := s.Open(id, &commonv1.Principal{Subject: "bob"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another principal opened a remembered id: %v", err)
	}
	s.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := s.Open(id, alice); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a remembered id opened after it expired: %v", err)
	}
	s.now = time.Now
	for range maxOpened + 10 {
		other, _, err := s.Mint(alice, "", "2025-11-25", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(other, alice); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.opened); n > maxOpened {
		t.Fatalf("%d ids remembered, bound %d", n, maxOpened)
	}
}

// TestPrincipalDigestIsStable: sealed session ids and relays carry the
// digest, so a gateway of a new version must compute what the old one
// did (a rolling upgrade keeps its sessions): SHA-256 of "len:subject"
// and "|len:group" for each group in order, hex.
func TestPrincipalDigestIsStable(t *testing.T) {
	for _, tc := range []struct {
		p    *commonv1.Principal
		want string
	}{
		{&commonv1.Principal{Subject: "alice", Groups: []string{"dev", "admin"}}, "f16e2c1431303d6e3801830b9a42174dfb13e6edb49bca3d81b346794e04bed8"},
		{&commonv1.Principal{Subject: "alice", Groups: []string{"admin", "dev"}}, "f16e2c1431303d6e3801830b9a42174dfb13e6edb49bca3d81b346794e04bed8"},
		{&commonv1.Principal{Subject: "alice"}, "8c9038777a9c5c17ffc2d2a35b3acdce34789ccdc6aa66081f3649075a2083b8"},
		{&commonv1.Principal{}, "ba768b331fd86cec803be04e56ab2b3d4c0e98ef4ee4fcd4e72ad7cce61a1d1f"},
	} {
		if got := PrincipalDigest(tc.p); got != tc.want {
			t.Errorf("PrincipalDigest(%v) = %s, want %s", tc.p, got, tc.want)
		}
	}
	groups := []string{"dev", "admin"}
	PrincipalDigest(&commonv1.Principal{Subject: "alice", Groups: groups})
	if groups[0] != "dev" {
		t.Error("PrincipalDigest reordered the principal's groups")
	}
}
