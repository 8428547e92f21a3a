# Kernel: o2_row_d128
# Mirrors samples/levels/bag_sum.ts.O2.dae, callback A0.1 (-O2: one callback per buffered row) with D = 128
#   (li r2, 128; row stride 512 bytes): the chunk loop L4..L5 runs 8 times.
# One iteration: one callback, dispatch included: pop, popb, mov, 8 chunks (bge, viota, vmask, vld, vgather,
#   vfadd, vscatter, add, jmp), the exit bge, ret.
# Command (from the repository root; samples/gen_mca.py runs it and writes o2_row_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/o2_row_d128.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (token, vmask's n), %rdi = the output's base
#   (@9), %rbp = the scratch buffer @10, %rdx = the address of output row r8 (@9[r8, 0], see the 2-D
#   references below); r8 = %r8, r9 = %r9; vN = %zmmN as data and %kN as a mask; %k6, %k7 = copies of the mask
#   that the gather and scatter consume; constant loaded before the loop: %zmm31 = 0, 1, ..., 15.
# Translation of each DAE instruction (the comment on every line names the one it implements):
#   - dispatch (one turn of the core's dispatch loop; the simulator charges it as `execute.dispatch`): movq
#     loads the token from the control queue (%rbx), addq $8 advances it (tokens are 8 bytes,
#     ember/sim/queue.py TOKEN_BYTES), testq + je test for the end token (0: case numbers start at 1), jmpq
#     *cases(,%rax,8) jumps to case A0.<token>. The table `cases` and the label `done` only need to
#     assemble: llvm-mca ignores control flow.
#   - ret: jmp back to the dispatch loop.
#   - bge a, b, L: cmpq b, a + jge L (a macro-fused pair).
#   - jmp L: jmp L.
#   - A DAE register that only holds an `li` constant is an immediate: r0 = 0, r1 = 1 (16 in the
#     hand-written code), r5/r6 = 16, and the row width D (r2 in compiled code, r3 = `dim` in the
#     hand-written code), which is a constant of each kernel.
#   - mov rX, r0 (r0 = 0): xorl, the zero idiom.
#   - add rX, rX, c: addq in place.
#   - pop rX: the operand queue (memory-mapped in the core's private L2 on the TMU) is read through %rsi:
#     movq (%rsi) + addq of the operand's queue size, as ember/sim/access.py `width` gives it (8 bytes for
#     an i64 or a traversal index).
#   - popb @buf: the buffer (one whole row) is the queue's head: movq %rsi, %rbp takes it as the buffer's
#     base, addq advances the queue past the row (D x 4 bytes).
#   - vmask vM, rS, rB, 16: n = rB - rS (movq + subq, into %rax), vpbroadcastd n into 16 dword lanes
#     (%zmm30), vpcmpgtd against the constant zmm31 = 0, 1, ..., 15 into %kM: lane k is on where n > k, i.e.
#     rS + k < rB. 4 instructions, exact for every |n| < 2^31 (n <= 0: no lane, n >= 16: all lanes). The
#     scalar route (clamp n to [0, 16] with two cmp/test + cmov, bzhi of 0xFFFF, kmovw) takes 8, and bzhi
#     alone is wrong for n < 0 or n >= 256.
#   - vld vD, @buf[rC], vM (the scratch buffer): vmovups (%rbp,rC,4), %zmmD {%kM} {z}; zeroing, as the DAE
#     leaves masked-off lanes 0.
#   - A 2-D reference @sym[rR, rC] has no x86 addressing mode (the row stride D x 4 bytes is not a scale of 1,
#     2, 4 or 8): imulq $stride, rR, B + addq base, B give the row's address in a base register B, then the
#     reference is (B,rC,4); imulq + addq is the shortest sequence (movq + shlq + addq is one more). Row bases
#     hoisted as a compiler would: computed where the row register changes. A row's address is computed once
#     per value of its row register, at the place where that register is written, and every reference to the
#     row shares its one base register, as LLVM at -O2 does (loop-invariant code motion and
#     common-subexpression elimination); the DAE core's 2-D reference is one instruction with no separate
#     address arithmetic. In this kernel: row r8 of the output in %rdx, computed right after `pop r8` (where
#     r8 is written), once per call; the 8 chunks' vgather and vscatter share it.
#   - vfadd.f32 vD, vA, vB: vaddps %zmmB, %zmmA, %zmmD (unmasked, as the DAE op).
#   - viota vD, rS, 16: vpbroadcastd rS into 16 dword lanes + vpaddd the constant zmm31 = 0..15 (dword
#     lanes, as the index vectors of vgatherdps/vscatterdps need).
#   - vgather vD, @sym[rR, vI], vM: the row's base register B (above), kmovw %kM into a spare mask register (a
#     gather clears its mask as lanes complete, and vM is used again), vpxord zeroes vD (the DAE leaves
#     masked-off lanes 0; it also breaks the dependence on vD's old value), vgatherdps (B,%zmmI,4), %zmmD
#     {%kcopy}.
#   - vscatter vS, @sym[rR, vI], vM: the row's base register B (above), kmovw %kM into a spare mask register
#     (a scatter clears it too), vscatterdps %zmmS, (B,%zmmI,4) {%kcopy}.

dispatch:                                   # the core's dispatch loop: one turn per control token
  movq (%rbx), %rax                         # dispatch: load the token from the control queue
  addq $8, %rbx                             # dispatch: advance the control queue (8-byte tokens)
  testq %rax, %rax                          # dispatch: the end token (0)?
  je done                                   # dispatch: the access program has ended
  jmpq *cases(,%rax,8)                      # dispatch: jump to case A0.<token>
A0.1:
  movq (%rsi), %r8                          # pop r8
  addq $8, %rsi                             # pop r8 (advance the queue: i64)
  imulq $512, %r8, %rdx                     # vgather v6 / vscatter v7, @9[r8, v3], v4 (row r8: offset, hoisted)
  addq %rdi, %rdx                           # vgather v6 / vscatter v7, @9[r8, v3], v4 (row r8: address, hoisted)
  movq %rsi, %rbp                           # popb @10 (the buffer's base)
  addq $512, %rsi                           # popb @10 (advance the queue past the row: 512 bytes)
  xorl %r9d, %r9d                           # mov r9, r0
L4:                                         # chunk 1 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 2 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 3 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 4 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 5 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 6 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 7 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: chunk 8 of 8
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
  vpbroadcastd %r9d, %zmm3                  # viota v3, r9, 16 (start in every lane)
  vpaddd %zmm31, %zmm3, %zmm3               # viota v3, r9, 16 (+ 0..15)
  movq $128, %rax                           # vmask v4, r9, r2, 16 (n = bound)
  subq %r9, %rax                            # vmask v4, r9, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v4, r9, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k4              # vmask v4, r9, r2, 16 (lanes k < n)
  vmovups (%rbp,%r9,4), %zmm5 {%k4} {z}     # vld v5, @10[r9], v4
  kmovw %k4, %k6                            # vgather v6, @9[r8, v3], v4 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v3], v4 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm3,4), %zmm6 {%k6}    # vgather v6, @9[r8, v3], v4
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k4, %k7                            # vscatter v7, @9[r8, v3], v4 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm3,4) {%k7}   # vscatter v7, @9[r8, v3], v4
  addq $16, %r9                             # add r9, r9, r6
  jmp L4                                    # jmp L4
# L4: the exit test
  cmpq $128, %r9                            # bge r9, r2, L5
  jge L5                                    # bge r9, r2, L5
L5:
  jmp dispatch                              # ret
done:
