#include "textflag.h"

// func dotAVX2(a, b *Vector) float32
//
// Dims is 100: three rounds of 32 floats in four 8-float accumulators,
// then the last 4 floats, then the accumulators summed.
TEXT ·dotAVX2(SB), NOSPLIT, $0-20
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ $3, CX

loop:
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS 0(DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop

	VMOVUPS 0(SI), X4
	VMULPS  0(DI), X4, X4
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS  X1, X0, X0
	VADDPS  X4, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS   X0, ret+16(FP)
	RET
