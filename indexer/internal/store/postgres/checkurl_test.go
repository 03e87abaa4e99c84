package postgres

import (
	"strings"
	"testing"
)

// TestCheckURLNamesNoPassword: the error of a malformed URL is logged by
// a reload; it must not carry the password.
func TestCheckURLNamesNoPassword(t *testing.T) {
	for _, url := range []string{"postgres://u:hunter2-secret@host:notaport/db", "postgres://u:hunter2-secret@[::1/db"} {
		err := CheckURL(url)
		if err == nil {
			t.Fatalf("%s: accepted", url)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
	if err := CheckURL("postgres://u:p@localhost:5432/db?sslmode=disable"); err != nil {
		t.Fatal(err)
	}
}
