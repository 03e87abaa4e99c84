package listing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// pager serves pages from a cursor → (items, next) table.
func pager(pages map[string]struct {
	items []int
	next  string
}) func(context.Context, string) ([]int, string, int, error) {
	return func(_ context.Context, cur string) ([]int, string, int, error) {
		p, ok := pages[cur]
		if !ok {
			return nil, "", 0, fmt.Errorf("unknown cursor %q", cur)
		}
		return p.items, p.next, 0, nil
	}
}

type page = struct {
	items []int
	next  string
}

func TestCollectFollowsCursorsToTheEnd(t *testing.T) {
	got, err := Collect(context.Background(), "tools", pager(map[string]page{
		"":   {[]int{1, 2}, "c1"},
		"c1": {nil, "c2"}, // an empty page in the middle is not the end
		"c2": {[]int{3}, ""},
	}))
	if err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("collect = %v, %v", got, err)
	}
}

func TestCollectRefusesCursorCycles(t *testing.T) {
	_, err := Collect(context.Background(), "tools", pager(map[string]page{
		"":  {[]int{1}, "a"},
		"a": {[]int{2}, "b"},
		"b": {[]int{3}, "a"},
	}))
	if !errors.Is(err, ErrCursorLoop) {
		t.Fatalf("err = %v, want a cursor loop", err)
	}
}

func TestCollectCapsPages(t *testing.T) {
	calls := 0
	_, err := Collect(context.Background(), "tools", func(_ context.Context, cur string) ([]int, string, int, error) {
		calls++
		return []int{calls}, fmt.Sprint("page-", calls), 0, nil // never ends, never repeats
	})
	if !errors.Is(err, ErrCursorLoop) || calls != MaxPages {
		t.Fatalf("err = %v after %d pages, want a loop error after %d", err, calls, MaxPages)
	}
}

func TestCollectCapsBytes(t *testing.T) {
	calls := 0
	_, err := Collect(context.Background(), "tools", func(_ context.Context, cur string) ([]int, string, int, error) {
		calls++
		return []int{calls}, fmt.Sprint("page-", calls), 1 << 20, nil // 1 MiB a page, never ending
	})
	if !errors.Is(err, ErrTooLarge) || calls != MaxBytes>>20+1 {
		t.Fatalf("err = %v after %d pages, want too large after %d", err, calls, MaxBytes>>20+1)
	}
}
