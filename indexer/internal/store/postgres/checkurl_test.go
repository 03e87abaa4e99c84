package postgres

import (
	"strings"
	"testing"
)

// TestCheckURLNamesNoPassword: the error of a malformed URL is logged by
// a reload; it must not carry the password, nor any other part of the
// URL (the whole URL is usually one secret), only the key.
func TestCheckURLNamesNoPassword(t *testing.T) {
	for _, url := range []string{"postgres://u-name:hunter2-secret@db-host:notaport/db", "postgres://u-name:hunter2-secret@[::1/db", "host=db-host port=x user=u-name password=hunter2-secret"} {
		err := CheckURL(url)
		if err == nil {
			t.Fatalf("%s: accepted", url)
		}
		for _, part := range []string{"hunter2", "u-name", "db-host", "notaport"} {
			if strings.Contains(err.Error(), part) {
				t.Fatalf("the error shows %s: %v", part, err)
			}
		}
		if !strings.Contains(err.Error(), "indexer.database") {
			t.Fatalf("the error does not name the key: %v", err)
		}
	}
	if err := CheckURL("postgres://u:p@localhost:5432/db?sslmode=disable"); err != nil {
		t.Fatal(err)
	}
}
