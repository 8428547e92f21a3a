# Kernel: core_vector_d128
# Mirrors the core-only vectorized code (no access unit) of `ember-opt
#   --pass=lower-emb,vectorize,simplify-mem,codegen samples/levels/bag_sum.ts.emb.eir`, the lookup loop
#   L6..L7 with D = 128 (li r2, 128; row stride 512 bytes): its inner chunk loop L8..L9 runs 8 times.
# One iteration: one lookup: bge, ld index, mov, 8 chunks (bge, vmask, vld row, vld out, vfadd, vst out,
#   add, jmp), the exit bge, add, jmp.
# Command (from the repository root; samples/gen_mca.py runs it and writes core_vector_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/core_vector_d128.s
# Registers: %rbx = the indices' base (@0), %rsi = the table's base (@8), %rdi = the output's base (@9),
#   scratch %rax (vmask's n) and %rdx (addresses); r8 = %r8 (the bag), r11 = %r11 (the bag's end), r12 =
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
#   - A 2-D reference @sym[rR, rC] has no x86 addressing mode (the row stride D x 4 bytes is not a scale of
#     1, 2, 4 or 8): imulq $stride, rR, %rdx + addq base, %rdx give the row's address, then (%rdx,rC,4).
#     This is done at every DAE memory instruction: the row address is not shared with a neighbouring
#     reference to the same row nor hoisted out of the loop, because the DAE code does not do that either
#     (the simulator charges each vld/vst as one instruction). imulq + addq is the shortest sequence (movq +
#     shlq + addq is one more).
#   - vld vD, @sym[rR, rC], vM: the row address (above), then vmovups (%rdx,rC,4), %zmmD {%kM} {z}.
#   - vst vS, @sym[rR, rC], vM: the row address (above), then vmovups %zmmS, (%rdx,rC,4) {%kM}.
#   - vfadd.f32 vD, vA, vB: vaddps %zmmB, %zmmA, %zmmD (unmasked, as the DAE op).
#   - ld rD, @sym[rI] (i64): movq (base,rI,8), rD.

L6:                                         # one lookup
  cmpq %r11, %r12                           # bge r12, r11, L7
  jge L7                                    # bge r12, r11, L7
  movq (%rbx,%r12,8), %r13                  # ld r13, @0[r12]
  xorl %r14d, %r14d                         # mov r14, r0
L8:                                         # chunk 1 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 2 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 3 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 4 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 5 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 6 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 7 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: chunk 8 of 8
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
  movq $128, %rax                           # vmask v4, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v4, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r14, r2, 16 (lanes k < n)
  imulq $512, %r13, %rdx                    # vld v5, @8[r13, r14], v4 (row offset)
  addq %rsi, %rdx                           # vld v5, @8[r13, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm5 {%k4} {z}    # vld v5, @8[r13, r14], v4
  imulq $512, %r8, %rdx                     # vld v6, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vld v6, @9[r8, r14], v4 (row address)
  vmovups (%rdx,%r14,4), %zmm6 {%k4} {z}    # vld v6, @9[r8, r14], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  imulq $512, %r8, %rdx                     # vst v7, @9[r8, r14], v4 (row offset)
  addq %rdi, %rdx                           # vst v7, @9[r8, r14], v4 (row address)
  vmovups %zmm7, (%rdx,%r14,4) {%k4}        # vst v7, @9[r8, r14], v4
  addq $16, %r14                            # add r14, r14, r6
  jmp L8                                    # jmp L8
# L8: the exit test
  cmpq $128, %r14                           # bge r14, r2, L9
  jge L9                                    # bge r14, r2, L9
L9:
  addq $1, %r12                             # add r12, r12, r1
  jmp L6                                    # jmp L6
L7:
