// Package listing follows the cursors of a backend's list (tools,
// resources, templates, prompts) to its end, within the bounds every
// listing the aggregator takes has, of an HTTP backend or of a stdio
// server's process: a backend that pages for ever, or through huge
// items, fails its listing instead of having the aggregator hold its
// pages.
package listing

import (
	"context"
	"errors"
	"fmt"
)

// MaxPages caps how many pages of one list a backend may return. A
// backend that pages forever would otherwise stall every catalog build.
const MaxPages = 1000

// MaxBytes caps the bytes of one list's pages together. Each page may be
// of tens of MiB, and every page of a listing is held until its end: a
// backend paging through large items would otherwise have the aggregator
// hold up to MaxPages of them.
const MaxBytes = 128 << 20

// ErrCursorLoop is a backend paging error: its cursors repeat or never
// end.
var ErrCursorLoop = errors.New("backend pagination does not terminate")

// ErrTooLarge is a backend listing past MaxBytes.
var ErrTooLarge = errors.New("backend listing is too large")

// Collect follows nextCursor until it is empty, refusing a cursor seen
// before (a cycle), more than MaxPages pages and more than MaxBytes. page
// returns one page's items, its next cursor and its size in bytes.
func Collect[T any](ctx context.Context, kind string, page func(context.Context, string) ([]T, string, int, error)) ([]T, error) {
	var all []T
	seen := map[string]bool{}
	cursor, total := "", 0
	for n := 0; ; n++ {
		if n == MaxPages {
			return nil, fmt.Errorf("%w: %s: more than %d pages", ErrCursorLoop, kind, MaxPages)
		}
		items, next, size, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		if total += size; total > MaxBytes {
			return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrTooLarge, kind, MaxBytes)
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%w: %s: cursor repeats", ErrCursorLoop, kind)
		}
		seen[next] = true
		cursor = next
	}
}
