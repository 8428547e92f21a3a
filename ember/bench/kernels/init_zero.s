# Kernel: init_zero
# Mirrors samples/levels/bag_sum.ts.O3.dae, the main code's output initialisation, inner loop L2..L3 (bge,
#   vmask, vst zeros, add, jmp) with D = 128 (li r2, 128; row stride 512 bytes).
# One iteration: one 16-lane chunk.
# Command (from the repository root; samples/gen_mca.py runs it and writes init_zero.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/init_zero.s
# Registers: scratch %rax (vmask's n) and %rdx (addresses), %rdi = the output's base (@9); r8 = %r8 (the
#   row), r9 = %r9; v0 = %zmm0 (zeros), v1 = %k1; constant loaded before the loop: %zmm31 = 0, 1, ..., 15.
# Translation of each DAE instruction (the comment on every line names the one it implements):
#   - bge a, b, L: cmpq b, a + jge L (a macro-fused pair).
#   - jmp L: jmp L.
#   - A DAE register that only holds an `li` constant is an immediate: r0 = 0, r1 = 1 (16 in the
#     hand-written code), r5/r6 = 16, and the row width D (r2 in compiled code, r3 = `dim` in the
#     hand-written code), which is a constant of each kernel.
#   - add rX, rX, c: addq in place.
#   - vmask vM, rS, rB, 16: n = rB - rS (movq + subq, into %rax), vpbroadcastd n into 16 dword lanes
#     (%zmm30), vpcmpgtd against the constant zmm31 = 0, 1, ..., 15 into %kM: lane k is on where n > k, i.e.
#     rS + k < rB. 4 instructions, exact for every |n| < 2^31 (n <= 0: no lane, n >= 16: all lanes). The
#     scalar route (clamp n to [0, 16] with two cmp/test + cmov, bzhi of 0xFFFF, kmovw) takes 8, and bzhi
#     alone is wrong for n < 0 or n >= 256.
#   - A 2-D reference @sym[rR, rC] has no x86 addressing mode (the row stride D x 4 bytes is not a scale of
#     1, 2, 4 or 8): imulq $stride, rR, %rdx + addq base, %rdx give the row's address, then (%rdx,rC,4).
#     This is done at every DAE memory instruction: the row address is not shared with a neighbouring
#     reference to the same row nor hoisted out of the loop, because the DAE code does not do that either
#     (the simulator charges each vld/vst as one instruction). imulq + addq is the shortest sequence (movq +
#     shlq + addq is one more).
#   - vst vS, @sym[rR, rC], vM: the row address (above), then vmovups %zmmS, (%rdx,rC,4) {%kM}.

L2:                                         # one chunk
  cmpq $128, %r9                            # bge r9, r2, L3
  jge L3                                    # bge r9, r2, L3
  movq $128, %rax                           # vmask v1, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v1, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r9, r2, 16 (lanes k < n)
  imulq $512, %r8, %rdx                     # vst v0, @9[r8, r9], v1 (row offset)
  addq %rdi, %rdx                           # vst v0, @9[r8, r9], v1 (row address)
  vmovups %zmm0, (%rdx,%r9,4) {%k1}         # vst v0, @9[r8, r9], v1
  addq $16, %r9                             # add r9, r9, r5
  jmp L2                                    # jmp L2
L3:
