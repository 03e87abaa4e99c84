package seal

import (
	"bytes"
	"testing"
)

// A sealed value opens under its key and purpose only, and not once any
// byte of it changed.
func TestSealOpen(t *testing.T) {
	k, err := Random()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Random()
	sealed, err := k.Seal([]byte("claims"), []byte("purpose-a"))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := k.Open(sealed, []byte("purpose-a")); err != nil || !bytes.Equal(plain, []byte("claims")) {
		t.Fatalf("open: %q %v", plain, err)
	}
	again, _ := k.Seal([]byte("claims"), []byte("purpose-a"))
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	altered := bytes.Clone(sealed)
	altered[len(altered)-1] ^= 1
	for name, c := range map[string]struct {
		key     *Key
		sealed  []byte
		purpose string
	}{
		"another purpose": {k, sealed, "purpose-b"},
		"another key":     {other, sealed, "purpose-a"},
		"altered":         {k, altered, "purpose-a"},
		"too short":       {k, sealed[:10], "purpose-a"},
		"empty":           {k, nil, "purpose-a"},
	} {
		if _, err := c.key.Open(c.sealed, []byte(c.purpose)); err != ErrOpen {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was accepted")
	}
}
