package catalog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxCursorLen is the longest cursor accepted, checked before decoding.
const MaxCursorLen = 512

// ErrInvalidCursor is returned for any cursor that is malformed, too long,
// or minted by a different list. The message never explains the encoding.
var ErrInvalidCursor = errors.New("invalid cursor")

// cursor is the decoded position: the list kind, the last key served (or a
// prefix of it, when the whole key would make the cursor too long), and how
// many items at or after that key were delivered so far. Every delivered
// item at or after the prefix starts with it, since it sorts between the
// prefix and the last key served. The cursor is opaque to clients
// (base64url JSON) and not a secret: it can only position within a view
// the caller may already see.
type cursor struct {
	Kind      string `json:"k"`
	LastKey   string `json:"l"`
	Delivered int    `json:"d"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// fitKey shortens c's key, at a rune boundary, until the encoded cursor
// fits MaxCursorLen.
func fitKey(c cursor) string {
	for len(encodeCursor(c)) > MaxCursorLen && len(c.LastKey) > 1 {
		over := len(encodeCursor(c)) - MaxCursorLen
		// Four base64 characters carry three bytes; JSON escaping can only
		// make a key byte longer, so cutting over*3/4 bytes (at least one)
		// never cuts more than needed by much.
		cut := max(len(c.LastKey)-max(over*3/4, 1), 1)
		for cut > 1 && !utf8.RuneStart(c.LastKey[cut]) {
			cut--
		}
		c.LastKey = c.LastKey[:cut]
	}
	return c.LastKey
}

func decodeCursor(s string, kind Kind) (cursor, error) {
	if len(s) > MaxCursorLen {
		return cursor{}, ErrInvalidCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, ErrInvalidCursor
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c cursor
	if err := dec.Decode(&c); err != nil || dec.More() {
		return cursor{}, ErrInvalidCursor
	}
	if c.Kind != kind.String() || c.LastKey == "" || c.Delivered < 1 {
		return cursor{}, ErrInvalidCursor
	}
	return c, nil
}

// Page selects one page of n sorted items whose i-th key is key(i). An
// empty cursor starts at the beginning. It returns the half-open range
// [start, end) to serve and the next cursor, empty on the last page.
//
// Equal keys are allowed: the cursor carries how many items with the last
// key were already delivered, so a run of equal keys across a page
// boundary loses and repeats nothing. A cursor whose key has vanished
// resumes at the next larger key.
func Page(kind Kind, n int, key func(int) string, cur string, size int) (start, end int, next string, err error) {
	if size < 1 {
		size = 1
	}
	if cur != "" {
		c, err := decodeCursor(cur, kind)
		if err != nil {
			return 0, 0, "", err
		}
		start = sort.Search(n, func(i int) bool { return key(i) >= c.LastKey })
		for skipped := 0; skipped < c.Delivered && start < n && strings.HasPrefix(key(start), c.LastKey); skipped++ {
			start++
		}
	}
	end = min(start+size, n)
	if end < n && end > start {
		// Delivered will be at most end, so sizing the key with end is safe.
		c := cursor{Kind: kind.String(), LastKey: key(end - 1), Delivered: end}
		c.LastKey = fitKey(c)
		first := sort.Search(end, func(i int) bool { return key(i) >= c.LastKey })
		c.Delivered = end - first
		next = encodeCursor(c)
	}
	return start, end, next, nil
}
