// Package seal is the gateway's one authenticated encryption of the values
// it hands to clients and reads back: Legacy session ids, sealed request
// states and input request ids (package session), and the operator
// console's cookies. A sealed value is a fresh random nonce followed by
// AES-256-GCM ciphertext; the associated data says what the value is for,
// so a value sealed for one purpose never opens as another.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
)

// KeyBytes is the length of a key.
const KeyBytes = 32

// ErrOpen is every failure to open: too short, altered, sealed under
// another key or for another purpose.
var ErrOpen = errors.New("seal: the value does not open")

// Key seals and opens values.
type Key struct {
	aead cipher.AEAD
}

// New makes a key from KeyBytes of key material.
func New(raw []byte) (*Key, error) {
	if len(raw) != KeyBytes {
		return nil, errors.New("seal: the key must be 32 bytes")
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead}, nil
}

// Random makes a key of fresh random material, for values that need not
// outlive the process.
func Random() (*Key, error) {
	raw := make([]byte, KeyBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return New(raw)
}

// Seal returns the nonce and the ciphertext of plain, bound to purpose.
func (k *Key) Seal(plain, purpose []byte) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return k.aead.Seal(nonce, nonce, plain, purpose), nil
}

// Open returns the plaintext of what Seal returned for the same purpose.
func (k *Key) Open(sealed, purpose []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n+k.aead.Overhead() {
		return nil, ErrOpen
	}
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], purpose)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}
