//go:build !amd64

package wordvec

var dot = dotGeneric
