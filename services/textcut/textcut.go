// Package textcut cuts text to a number of bytes without cutting a
// character in two: for bounded log fields, error texts and pages.
package textcut

import "unicode/utf8"

// Prefix is the longest prefix of s of at most n bytes that ends on a
// character boundary; s itself when it is no longer than n.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
