package opshttp

import "time"

// SetBodyTimeout sets bodyTimeout until the returned function restores it.
func SetBodyTimeout(d time.Duration) (restore func()) {
	old := bodyTimeout
	bodyTimeout = d
	return func() { bodyTimeout = old }
}
