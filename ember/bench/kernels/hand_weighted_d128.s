# Kernel: hand_weighted_d128
# Mirrors ember/bench/handwritten/bag_weighted.d128.dae, callback A0.2 (one weighted lookup: pop the row and
#   its weight, splat the weight, scale the row, add it to the accumulator), which -O3 also emits. One
#   into each of the 8 zmm pieces of v2 (vsplat.f32 v2, f1, 128 is 8 machine broadcasts).
# Command (from the repository root; samples/gen_mca.py runs it and writes hand_weighted_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/hand_weighted_d128.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (the token); vN = %zmmN (a DAE vector of
#   128 f32 lanes is 8 zmm registers: v0 = %zmm0-7, v1 = %zmm8-15, v2 = %zmm16-23); r10 = %r10, %rdi = the
#   output base.
# Translation: dispatch as in the other callback kernels (load the token, advance, test, je, jmpq through the
#   case table); pop vN of a 128-lane row: 8 vmovups from the queue head and addq $512 %rsi; ret: jmp back to
#   the dispatch loop.

dispatch:                                   # the core's dispatch loop: one turn per control token
  movq (%rbx), %rax                         # dispatch: load the token from the control queue
  addq $8, %rbx                             # dispatch: advance the control queue (8-byte tokens)
  testq %rax, %rax                          # dispatch: the end token (0)?
  je done                                   # dispatch: the access program has ended
  jmpq *cases(,%rax,8)                      # dispatch: jump to case A0.<token>
A0.2:
  vmovups 0(%rsi), %zmm8  # pop v1 (piece 1 of 8)
  vmovups 64(%rsi), %zmm9  # pop v1 (piece 2 of 8)
  vmovups 128(%rsi), %zmm10  # pop v1 (piece 3 of 8)
  vmovups 192(%rsi), %zmm11  # pop v1 (piece 4 of 8)
  vmovups 256(%rsi), %zmm12  # pop v1 (piece 5 of 8)
  vmovups 320(%rsi), %zmm13  # pop v1 (piece 6 of 8)
  vmovups 384(%rsi), %zmm14  # pop v1 (piece 7 of 8)
  vmovups 448(%rsi), %zmm15  # pop v1 (piece 8 of 8)
  vmovss 512(%rsi), %xmm30  # pop f1 (the weight)
  addq $516, %rsi  # pop v1, pop f1 (advance the queue past the row and the weight)
  vbroadcastss %xmm30, %zmm16  # vsplat.f32 v2, f1, 128 (one broadcast: its 8 pieces are copies of one register)
  vmulps %zmm16, %zmm8, %zmm8  # vfmul.f32 v1, v1, v2 (piece 1 of 8)
  vmulps %zmm16, %zmm9, %zmm9  # vfmul.f32 v1, v1, v2 (piece 2 of 8)
  vmulps %zmm16, %zmm10, %zmm10  # vfmul.f32 v1, v1, v2 (piece 3 of 8)
  vmulps %zmm16, %zmm11, %zmm11  # vfmul.f32 v1, v1, v2 (piece 4 of 8)
  vmulps %zmm16, %zmm12, %zmm12  # vfmul.f32 v1, v1, v2 (piece 5 of 8)
  vmulps %zmm16, %zmm13, %zmm13  # vfmul.f32 v1, v1, v2 (piece 6 of 8)
  vmulps %zmm16, %zmm14, %zmm14  # vfmul.f32 v1, v1, v2 (piece 7 of 8)
  vmulps %zmm16, %zmm15, %zmm15  # vfmul.f32 v1, v1, v2 (piece 8 of 8)
  vaddps %zmm8, %zmm0, %zmm0  # vfadd.f32 v0, v0, v1 (piece 1 of 8)
  vaddps %zmm9, %zmm1, %zmm1  # vfadd.f32 v0, v0, v1 (piece 2 of 8)
  vaddps %zmm10, %zmm2, %zmm2  # vfadd.f32 v0, v0, v1 (piece 3 of 8)
  vaddps %zmm11, %zmm3, %zmm3  # vfadd.f32 v0, v0, v1 (piece 4 of 8)
  vaddps %zmm12, %zmm4, %zmm4  # vfadd.f32 v0, v0, v1 (piece 5 of 8)
  vaddps %zmm13, %zmm5, %zmm5  # vfadd.f32 v0, v0, v1 (piece 6 of 8)
  vaddps %zmm14, %zmm6, %zmm6  # vfadd.f32 v0, v0, v1 (piece 7 of 8)
  vaddps %zmm15, %zmm7, %zmm7  # vfadd.f32 v0, v0, v1 (piece 8 of 8)
  jmp dispatch  # ret
done:
