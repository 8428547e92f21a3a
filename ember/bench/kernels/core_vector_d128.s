# Kernel: core_vector_d128
# Mirrors the core-only vectorized code (no access unit) of `ember-opt
#   --pass=lower-emb,vectorize,simplify-mem,codegen samples/levels/bag_sum.ts.emb.eir`, the lookup loop
#   L6..L7 with D = 128 (li r2, 128; row stride 512 bytes): its inner chunk loop L8..L9 runs 8 times.
# One iteration: one lookup: bge, ld index, mov, 8 chunks (bge, vmask, vld row, vld out, vfadd, vst out,
#   add, jmp), the exit bge, add, jmp.
# Command (from the repository root; samples/gen_mca.py runs it and writes core_vector_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/core_vector_d128.s
# Registers: %rbx = the indices' base (@0), %rsi = the table's base (@8), %rdi = the output's base (@9),
#   scratch %rax (vmask's n); %rdx = the address of table row r13 (@8[r13, 0]), %r9 = the address of output
#   row r8 (@9[r8, 0]) (see the 2-D references below); r8 = %r8 (the bag), r11 = %r11 (the bag's end), r12 =
#   %r12, r13 = %r13, r14 = %r14; vN = %zmmN as data and %kN as a mask; constant loaded before the loop:
#   %zmm31 = 0, 1, ..., 15.
# Translation of each DAE instruction (the comment on every line names the one it implements):
#   - bge a, b, L: cmpq b, a + jge L (a macro-fused pair).
#   - jmp L: jmp L.
#   - A DAE register that only holds an `li` constant is an immediate: r0 = 0, r1 = 1 (16 in the
#     hand-written code), r5/r6 = 16, and the row width D (r2 in compiled code, r3 = `dim` in the
#     hand-written code), which is a constant of each kernel.
#   - mov rX, r0 (r0 = 0): xorl, the zero idiom.
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
#     address arithmetic. In this kernel: row r13 of the table in %rdx, computed right after
#     `ld r13, @0[r12]`, once per lookup (2 instructions of the iteration, shared by the 8 chunks' vld); row
#     r8 of the output in %r9, computed where r8 is set, before the lookup loop (in the bag loop L4..L5,
#     outside this kernel), so not part of the iteration; the 8 chunks' vld and vst of row r8 share %r9.
#   - vld vD, @sym[rR, rC], vM: vmovups (B,rC,4), %zmmD {%kM} {z}, B the row's base register (above).
#   - vst vS, @sym[rR, rC], vM: vmovups %zmmS, (B,rC,4) {%kM}, B the row's base register (above).
#   - vfadd.f32 vD, vA, vB: vaddps %zmmB, %zmmA, %zmmD (unmasked, as the DAE op).
#   - ld rD, @sym[rI] (i64): movq (base,rI,8), rD.

L6:                                         # one lookup
  cmpq %r11, %r12                           # bge r12, r11, L7
  jge L7                                    # bge r12, r11, L7
  movq (%rbx,%r12,8), %r13                  # ld r13, @0[r12]
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row r13: offset, hoisted)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row r13: address, hoisted)
  xorl %r14d, %r14d                         # mov r14, r0
L8:                                         # chunk 1 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 2 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 3 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 4 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 5 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 6 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 7 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 8 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  vmovups (%r9,%r14,4), %zmm6 {%k4} {z}     # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  vmovups %zmm7, (%r9,%r14,4) {%k4}         # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: the exit test
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
L9:
  addq $1, %r12                             # add r12, r12, r1
  jmp L6                                    # jmp L6
L7:
