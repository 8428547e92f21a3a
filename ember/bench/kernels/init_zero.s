# Kernel: init_zero
# Mirrors samples/levels/bag_sum.ts.O3.dae, the main code's output initialisation, inner loop L2..L3 (bge,
#   vmask, vst zeros, add, jmp) with D = 128 (li r2, 128; row stride 512 bytes).
# One iteration: one 16-lane chunk.
# Command (from the repository root; samples/gen_mca.py runs it and writes init_zero.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/init_zero.s
# Registers: scratch %rax (vmask's n), %rdi = the output's base (@9), %rdx = the address of output row r8
#   (@9[r8, 0], see the 2-D references below); r8 = %r8 (the row), r9 = %r9; v0 = %zmm0 (zeros), v1 = %k1;
#   constant loaded before the loop: %zmm31 = 0, 1, ..., 15.
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
#   - A 2-D reference @sym[rR, rC] has no x86 addressing mode (the row stride D x 4 bytes is not a scale of 1,
#     2, 4 or 8): imulq $stride, rR, B + addq base, B give the row's address in a base register B, then the
#     reference is (B,rC,4); imulq + addq is the shortest sequence (movq + shlq + addq is one more). Row bases
#     hoisted as a compiler would: computed where the row register changes. A row's address is computed once
#     per value of its row register, at the place where that register is written, and every reference to the
#     row shares its one base register, as LLVM at -O2 does (loop-invariant code motion and
#     common-subexpression elimination); the DAE core's 2-D reference is one instruction with no separate
#     address arithmetic. In this kernel: row r8 of the output in %rdx, computed where r8 is set (the outer
#     loop L0..L1, outside this kernel), so no address arithmetic is part of the iteration.
#   - vst vS, @sym[rR, rC], vM: vmovups %zmmS, (B,rC,4) {%kM}, B the row's base register (above).

L2:                                         # one chunk
  cmpq $128, %r9                            # bge r9, r2, L3
  jge L3                                    # bge r9, r2, L3
  movq $128, %rax                           # vmask v1, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v1, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r9, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r9,4) {%k1}         # vst v0, @9[r8, r9], v1
  addq $16, %r9                             # add r9, r9, r5
  jmp L2                                    # jmp L2
L3:
