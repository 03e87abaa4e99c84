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
// prefix of it, when the whole key would make the cursor too long, which
// Cut says), and how many items at or after that key were delivered so
// far: those equal to the whole key, or every one starting with the
// prefix (every delivered item at or after the prefix starts with it,
// since it sorts between the prefix and the last key served). The cursor
// is opaque to clients (base64url JSON) and not a secret: it can only
// position within a view the caller may already see.
type cursor struct {
	Kind      string `json:"k"`
	LastKey   string `json:"l"`
	Delivered int    `json:"d"`
	Cut       bool   `json:"c,omitempty"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// fitKey returns the longest prefix of c's key, cut at a rune boundary so
// it survives JSON, with which the encoded cursor fits MaxCursorLen. The
// encoded length grows with the prefix, so a binary search over rune
// boundaries finds it.
func fitKey(c cursor) string {
	key := c.LastKey
	if len(encodeCursor(c)) <= MaxCursorLen {
		return key
	}
	var cuts []int // byte offsets that end a rune, shortest first
	for i := range key {
		if i > 0 {
			cuts = append(cuts, i)
		}
	}
	tooLong := sort.Search(len(cuts), func(i int) bool {
		c.LastKey = key[:cuts[i]]
		return len(encodeCursor(c)) > MaxCursorLen
	})
	if tooLong == 0 {
		// Even one rune is too long (impossible for the kinds and counts
		// that exist); the first rune still positions correctly.
		_, size := utf8.DecodeRuneInString(key)
		return key[:size]
	}
	return key[:cuts[tooLong-1]]
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
// resumes at the next larger key, even one the vanished key is a prefix
// of. (A cursor whose key was cut to fit resumes after as many items
// starting with the cut as it delivered: a change among those between
// pages can repeat or skip one of them, for keys of hundreds of bytes.)
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
		delivered := func(k string) bool { return k == c.LastKey }
		if c.Cut {
			delivered = func(k string) bool { return strings.HasPrefix(k, c.LastKey) }
		}
		for skipped := 0; skipped < c.Delivered && start < n && delivered(key(start)); skipped++ {
			start++
		}
	}
	end = min(start+size, n)
	if end < n && end > start {
		// Delivered will be at most end, so sizing the key with end is safe.
		c := cursor{Kind: kind.String(), LastKey: key(end - 1), Delivered: end}
		if len(encodeCursor(c)) > MaxCursorLen {
			c.Cut = true
			c.LastKey = fitKey(c)
		}
		first := sort.Search(end, func(i int) bool { return key(i) >= c.LastKey })
		c.Delivered = end - first
		next = encodeCursor(c)
	}
	return start, end, next, nil
}
