package catalog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// walk pages through keys with the given page size and returns the keys in
// delivery order, checking the page-size bound and the last-page rule.
func walk(t *testing.T, kind Kind, keys []string, size int) []string {
	t.Helper()
	var got []string
	cur := ""
	for pages := 0; ; pages++ {
		if pages > len(keys)+1 {
			t.Fatalf("paging does not terminate after %d pages", pages)
		}
		start, end, next, err := Page(kind, len(keys), func(i int) string { return keys[i] }, cur, size)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if end-start > size {
			t.Fatalf("page %d has %d items, more than %d", pages, end-start, size)
		}
		if len(next) > MaxCursorLen {
			t.Fatalf("page %d: cursor of %d characters", pages, len(next))
		}
		got = append(got, keys[start:end]...)
		if next == "" {
			if end != len(keys) {
				t.Fatalf("page %d ends at %d of %d without a next cursor", pages, end, len(keys))
			}
			return got
		}
		cur = next
	}
}

func distinctKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("tool_%05d", i)
	}
	return keys
}

// withRun makes keys[from:from+n] equal (still sorted).
func withRun(keys []string, from, n int) []string {
	for i := from; i < from+n && i < len(keys); i++ {
		keys[i] = keys[from]
	}
	return keys
}

func TestPageCorporaDeliveredExactlyOnceInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 1001, 1100, 2007} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			keys := distinctKeys(n)
			got := walk(t, KindTools, keys, 1000)
			if !slices.Equal(got, keys) {
				t.Fatalf("delivered %d items, want the %d in order", len(got), n)
			}
		})
	}
}

func TestPageEqualKeysAcrossBoundaries(t *testing.T) {
	cases := []struct {
		name string
		keys []string
		size int
	}{
		// A run of 5 straddling the first boundary (996..1000) and a 3-way
		// tie mid-page.
		{"1100/run5+tie3", withRun(withRun(distinctKeys(1100), 996, 5), 500, 3), 1000},
		{"1001/run5+tie3", withRun(withRun(distinctKeys(1001), 996, 5), 500, 3), 1000},
		{"2000/run5+tie3", withRun(withRun(distinctKeys(2000), 996, 5), 500, 3), 1000},
		{"1100/run50", withRun(distinctKeys(1100), 975, 50), 1000},
		{"2000/run50", withRun(distinctKeys(2000), 975, 50), 1000},
		{"1100/all-equal", withRun(distinctKeys(1100), 0, 1100), 1000},
		{"2007/all-equal", withRun(distinctKeys(2007), 0, 2007), 1000},
		// A run longer than a page spans several pages.
		{"small-pages/run50", withRun(distinctKeys(120), 30, 50), 7},
		{"small-pages/all-equal", withRun(distinctKeys(64), 0, 64), 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := walk(t, KindResources, c.keys, c.size)
			if !slices.Equal(got, c.keys) {
				t.Fatalf("delivered %d items, want %d in order", len(got), len(c.keys))
			}
		})
	}
}

func TestPageLongKeysKeepCursorShort(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes, escapes nothing but is multi-byte
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("%s/%03d", long, i/4)) // runs of 4 equal long keys
	}
	for _, size := range []int{1, 3, 5} {
		if got := walk(t, KindResources, keys, size); !slices.Equal(got, keys) {
			t.Fatalf("size %d: delivered %d items, want %d in order", size, len(got), len(keys))
		}
	}
}

// A key that vanished between pages resumes at the next larger key, even
// one it is a prefix of (which was once skipped as if delivered).
func TestPageKeyVanishedResumesAtNextKey(t *testing.T) {
	for _, c := range []struct{ keys, shrunk, want []string }{
		{[]string{"a", "b", "c", "d"}, []string{"a", "c", "d"}, []string{"c", "d"}},
		{[]string{"a", "weather_get", "weather_get_forecast", "z"}, []string{"a", "weather_get_forecast", "z"}, []string{"weather_get_forecast", "z"}},
		{[]string{"file:///a", "file:///a/b", "file:///a/b/c"}, []string{"file:///a/b", "file:///a/b/c"}, []string{"file:///a/b", "file:///a/b/c"}},
	} {
		_, _, next, err := Page(KindTools, len(c.keys), func(i int) string { return c.keys[i] }, "", len(c.keys)-len(c.want))
		if err != nil || next == "" {
			t.Fatalf("first page: next %q, err %v", next, err)
		}
		start, end, _, err := Page(KindTools, len(c.shrunk), func(i int) string { return c.shrunk[i] }, next, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.shrunk[start:end]; !slices.Equal(got, c.want) {
			t.Errorf("%v then %v: resumed with %v, want %v", c.keys, c.shrunk, got, c.want)
		}
	}
}

func TestPageCursorBoundToItsList(t *testing.T) {
	keys := []string{"a", "b"}
	for _, minted := range Kinds {
		_, _, cur, err := Page(minted, len(keys), func(i int) string { return keys[i] }, "", 1)
		if err != nil || cur == "" {
			t.Fatalf("minting a %s cursor: %q, %v", minted, cur, err)
		}
		for _, used := range Kinds {
			_, _, _, err := Page(used, len(keys), func(i int) string { return keys[i] }, cur, 1)
			if used == minted && err != nil {
				t.Errorf("%s cursor rejected by its own list: %v", minted, err)
			}
			if used != minted && !errors.Is(err, ErrInvalidCursor) {
				t.Errorf("%s cursor used on %s: err %v, want ErrInvalidCursor", minted, used, err)
			}
		}
	}
}

func TestPageRejectsMalformedCursors(t *testing.T) {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	valid := b64(`{"k":"tools","l":"a","d":1}`)
	cases := map[string]string{
		"not base64":        "!!!not-base64!!!",
		"padded base64":     base64.URLEncoding.EncodeToString([]byte(`{"k":"tools","l":"a","d":1}`)) + "==",
		"std alphabet":      strings.ReplaceAll(strings.ReplaceAll(valid, "-", "+"), "_", "/") + "+/",
		"not json":          b64("hello"),
		"json array":        b64(`["tools","a",1]`),
		"json string":       b64(`"tools"`),
		"missing key":       b64(`{"k":"tools","d":1}`),
		"null key":          b64(`{"k":"tools","l":null,"d":1}`),
		"empty key":         b64(`{"k":"tools","l":"","d":1}`),
		"zero delivered":    b64(`{"k":"tools","l":"a","d":0}`),
		"negative":          b64(`{"k":"tools","l":"a","d":-3}`),
		"fractional":        b64(`{"k":"tools","l":"a","d":1.5}`),
		"string delivered":  b64(`{"k":"tools","l":"a","d":"1"}`),
		"numeric key":       b64(`{"k":"tools","l":7,"d":1}`),
		"unknown field":     b64(`{"k":"tools","l":"a","d":1,"x":true}`),
		"trailing data":     b64(`{"k":"tools","l":"a","d":1}{}`),
		"unknown kind":      b64(`{"k":"widgets","l":"a","d":1}`),
		"overlong":          b64(`{"k":"tools","l":"` + strings.Repeat("a", 400) + `","d":1}`),
		"overlong garbage":  strings.Repeat("A", MaxCursorLen+1),
		"whitespace":        " " + valid,
		"null":              b64("null"),
		"empty json object": b64("{}"),
	}
	keys := []string{"a", "b", "c"}
	if _, _, _, err := Page(KindTools, len(keys), func(i int) string { return keys[i] }, valid, 1); err != nil {
		t.Fatalf("the valid control cursor was rejected: %v", err)
	}
	for name, cur := range cases {
		_, _, _, err := Page(KindTools, len(keys), func(i int) string { return keys[i] }, cur, 1)
		if !errors.Is(err, ErrInvalidCursor) {
			t.Errorf("%s: err %v, want ErrInvalidCursor", name, err)
		}
	}
}
