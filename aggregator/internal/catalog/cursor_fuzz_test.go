package catalog

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCursorDecode feeds arbitrary client-supplied cursors to the decoder.
// Whatever it accepts must be short, of the kind asked for, well formed,
// and re-encode to a cursor that decodes to the same position; it must be
// refused for every other kind, so a tools cursor never pages prompts.
func FuzzCursorDecode(f *testing.F) {
	for _, k := range Kinds {
		f.Add(encodeCursor(cursor{Kind: k.String(), LastKey: "alpha_echo", Delivered: 1}), int(k))
	}
	f.Add("", 0)
	f.Add("not a cursor", 0)
	// Hand-made positions: each is wrong in one way except the first.
	for _, doc := range []string{
		`{"k":"tools","l":"a","d":1}`,
		`{"k":"tools","l":"a","d":1,"x":1}`,    // unknown member
		`{"k":"tools","l":"","d":1}`,           // empty key
		`{"k":"tools","l":"a","d":0}`,          // nothing delivered
		`{"k":"tools","l":"a","d":-1}`,         // negative count
		`{"k":"tools","l":"a","d":1e999}`,      // count out of range
		`{"k":"tools","l":"a","d":"1"}`,        // count is a string
		`{"k":"tools","l":"a","d":1}{"k":"x"}`, // two JSON values
		`{"k":"tools","l":"\ud800","d":1}`,     // lone surrogate
		`{"k":"TOOLS","l":"a","d":1}`,          // kind is case-sensitive
		`null`, `[]`, `"a"`, `{}`,
	} {
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(doc)), 0)
	}
	f.Add(base64.URLEncoding.EncodeToString([]byte(`{"k":"tools","l":"ab","d":1}`)), 0)  // padded
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"k":"tools","l":"a?>","d":1}`)), 0) // wrong alphabet
	f.Add(strings.Repeat("A", MaxCursorLen+1), 0)                                        // too long
	f.Add(encodeCursor(cursor{Kind: "tools", LastKey: "a", Delivered: 1}), int(KindPrompts))

	f.Fuzz(func(t *testing.T, s string, kindIndex int) {
		kind := Kinds[uint(kindIndex)%uint(len(Kinds))]
		c, err := decodeCursor(s, kind)
		if err != nil {
			if err != ErrInvalidCursor {
				t.Fatalf("decodeCursor(%q) = %v, want ErrInvalidCursor", s, err)
			}
			return
		}
		if len(s) > MaxCursorLen {
			t.Fatalf("accepted a cursor of %d characters (limit %d)", len(s), MaxCursorLen)
		}
		if c.Kind != kind.String() || c.LastKey == "" || c.Delivered < 1 {
			t.Fatalf("accepted a malformed position %+v for kind %s", c, kind)
		}
		for _, other := range Kinds {
			if other != kind {
				if _, err := decodeCursor(s, other); err == nil {
					t.Fatalf("cursor %q accepted for both %s and %s", s, kind, other)
				}
			}
		}
		// Re-encoding may grow past the limit (invalid UTF-8 in the key
		// comes back as U+FFFD, three bytes); the server never re-encodes a
		// client's cursor, so only a re-encoding that fits must round-trip.
		if enc := encodeCursor(c); len(enc) <= MaxCursorLen {
			again, err := decodeCursor(enc, kind)
			if err != nil || again != c {
				t.Fatalf("re-encoded %+v decodes to %+v, %v", c, again, err)
			}
		}
	})
}

// FuzzCursorRoundTrip checks decode(encode(x)) == x for every position the
// pager can mint, and that Page itself, walking lists built around an
// arbitrary key (including keys far longer than a cursor may be, which
// the pager shortens), keeps every cursor within MaxCursorLen and of its
// kind, and delivers every item exactly once, in order.
func FuzzCursorRoundTrip(f *testing.F) {
	f.Add("alpha_echo", 1, 1, 0)
	f.Add("file:///a.txt", 3, 2, 1)
	f.Add("weather://city/{name}", 1000, 7, 2)
	f.Add("grüß \"quoted\" \\ <tag> &amp; \u2028", 2, 3, 3)
	f.Add(strings.Repeat("x", 700), 5, 1, 0)
	f.Add(strings.Repeat("ü", 400), 5, 2, 1)
	f.Add(strings.Repeat("\x01\"", 300), 1, 1, 2)
	f.Add("z", 1<<40, 4, 3)

	f.Fuzz(func(t *testing.T, key string, delivered int, pageSize int, kindIndex int) {
		// Catalog keys come out of JSON documents, so they are valid UTF-8.
		if key == "" || !utf8.ValidString(key) {
			return
		}
		kind := Kinds[uint(kindIndex)%uint(len(Kinds))]
		if delivered >= 1 {
			c := cursor{Kind: kind.String(), LastKey: key, Delivered: delivered}
			if enc := encodeCursor(c); len(enc) <= MaxCursorLen {
				got, err := decodeCursor(enc, kind)
				if err != nil || got != c {
					t.Fatalf("decode(encode(%+v)) = %+v, %v", c, got, err)
				}
			}
		}

		// A sorted list with runs of equal keys, keys that extend one
		// another, and one key long enough to force shortening.
		long := strings.Repeat(key, MaxCursorLen/len(key)+2)
		keys := []string{key, key, key + "a", key + "a", key + "\x00", long, long, long + "b", "~" + key}
		slices.Sort(keys)
		size := 1 + int(uint(pageSize)%4)
		var got []string
		cur := ""
		for pages := 0; ; pages++ {
			if pages > len(keys)+1 {
				t.Fatalf("paging %q does not terminate", keys)
			}
			start, end, next, err := Page(kind, len(keys), func(i int) string { return keys[i] }, cur, size)
			if err != nil {
				t.Fatalf("page %d of %q: %v", pages, keys, err)
			}
			got = append(got, keys[start:end]...)
			if next == "" {
				break
			}
			if len(next) > MaxCursorLen {
				t.Fatalf("minted a cursor of %d characters", len(next))
			}
			if _, err := decodeCursor(next, kind); err != nil {
				t.Fatalf("minted cursor %q is refused: %v", next, err)
			}
			for _, other := range Kinds {
				if _, err := decodeCursor(next, other); other != kind && err == nil {
					t.Fatalf("minted %s cursor accepted for %s", kind, other)
				}
			}
			cur = next
		}
		if !slices.Equal(got, keys) {
			t.Fatalf("walk with page size %d delivered %q, want %q", size, got, keys)
		}
	})
}
