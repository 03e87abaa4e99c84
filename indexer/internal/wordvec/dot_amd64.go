package wordvec

import "golang.org/x/sys/cpu"

// dotAVX2 is Dot with 256-bit fused multiply-adds (dot_amd64.s): 96 of
// the 100 dimensions in four lanes of eight, the last four in one of four.
//
//go:noescape
func dotAVX2(a, b *Vector) float32

var dot = dotGeneric

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		dot = dotAVX2
	}
}
