package textcut

import "testing"

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"aé", 2, "a"}, // é is two bytes: not cut in two
		{"aé", 3, "aé"},
		{"日本", 4, "日"},
		{"abc", 0, ""},
		{"abc", -1, ""},
	} {
		if got := Prefix(c.s, c.n); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
