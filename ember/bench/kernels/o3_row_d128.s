# Kernel: o3_row_d128
# Mirrors samples/levels/bag_sum.ts.O3.dae, callback A0.2 (-O3: one callback per buffered row) with D = 128
#   (li r2, 128; row stride 512 bytes): the chunk loop L7..L8 runs 8 times.
# One iteration: one callback, dispatch included: popb, mov, 8 chunks, the exit bge, ret.
# Command (from the repository root; samples/gen_mca.py runs it and writes o3_row_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/o3_row_d128.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (token, vmask's n), %rdi = the output's base
#   (@9), %rbp = the scratch buffer @10, %r9 = the address of output row r11 (@9[r11, 0], see the 2-D
#   references below); r11 = %r11 (the bag, counted by A0.1), r15 = %r15; vN = %zmmN as data and %kN as a
#   mask; constant loaded before the loop: %zmm31 = 0, 1, ..., 15.
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
#     address arithmetic. In this kernel: row r11 of the output in %r9, computed where r11 changes: in the
#     counting callback A0.1 (`add r11, r11, r1`; o3_bag_d128 shows the imulq + addq there), not inside this
#     callback at all; the 8 chunks' vld and vst share it.
#   - vld vD, @sym[rR, rC], vM: vmovups (B,rC,4), %zmmD {%kM} {z}, B the row's base register (above).
#   - vst vS, @sym[rR, rC], vM: vmovups %zmmS, (B,rC,4) {%kM}, B the row's base register (above).
#   - vfadd.f32 vD, vA, vB: vaddps %zmmB, %zmmA, %zmmD (unmasked, as the DAE op).

dispatch:                                   # the core's dispatch loop: one turn per control token
  movq (%rbx), %rax                         # dispatch: load the token from the control queue
  addq $8, %rbx                             # dispatch: advance the control queue (8-byte tokens)
  testq %rax, %rax                          # dispatch: the end token (0)?
  je done                                   # dispatch: the access program has ended
  jmpq *cases(,%rax,8)                      # dispatch: jump to case A0.<token>
A0.2:
  movq %rsi, %rbp                           # popb @10 (the buffer's base)
  addq $512, %rsi                           # popb @10 (advance the queue past the row: 512 bytes)
  xorl %r15d, %r15d                         # mov r15, r0
L7:                                         # chunk 1 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 2 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 3 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 4 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 5 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 6 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 7 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: chunk 8 of 8
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
  movq $128, %rax                           # vmask v3, r15, r2, 16 (n = bound)
  subq %r15, %rax                           # vmask v3, r15, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v3, r15, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k3              # vmask v3, r15, r2, 16 (lanes k < n)
  vmovups (%rbp,%r15,4), %zmm4 {%k3} {z}    # vld v4, @10[r15], v3
  vmovups (%r9,%r15,4), %zmm5 {%k3} {z}     # vld v5, @9[r11, r15], v3
  vaddps %zmm4, %zmm5, %zmm6                # vfadd.f32 v6, v5, v4
  vmovups %zmm6, (%r9,%r15,4) {%k3}         # vst v6, @9[r11, r15], v3
  addq $16, %r15                            # add r15, r15, r5
  jmp L7                                    # jmp L7
# L7: the exit test
  cmpq $128, %r15                           # bge r15, r2, L8
  jge L8                                    # bge r15, r2, L8
L8:
  jmp dispatch                              # ret
done:
