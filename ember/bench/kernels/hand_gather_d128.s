# Kernel: hand_gather_d128
# Mirrors ember/bench/handwritten/gather.dae, callback A0.1 (count the lookup, copy its buffered row into
#   its output row) with D = 128 (r3 = dim @1, 1 = 128; row stride 512 bytes): the chunk loop R0..R1 runs 8
#   times.
# One iteration: one callback, dispatch included: add, popb, mov, 8 chunks (bge, vmask, vld, vst, add, jmp),
#   the exit bge, ret.
# Command (from the repository root; samples/gen_mca.py runs it and writes hand_gather_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/hand_gather_d128.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (token, vmask's n), %rdi = the output's base
#   (@2), %rbp = the scratch buffer @3, %r9 = the address of output row r10 (@2[r10, 0], see the 2-D
#   references below); r10 = %r10 (the bag or lookup, counted on the core), r11 = %r11; vN = %zmmN as data and
#   %kN as a mask; constant loaded before the loop: %zmm31 = 0, 1, ..., 15.
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
#     address arithmetic. In this kernel: row r10 of the output in %r9, computed right after `add r10, r10, 1`
#     at the top of this callback (where r10 changes), once per call; the 8 chunks' vst share it.
#   - vst vS, @sym[rR, rC], vM: vmovups %zmmS, (B,rC,4) {%kM}, B the row's base register (above).

dispatch:                                   # the core's dispatch loop: one turn per control token
  movq (%rbx), %rax                         # dispatch: load the token from the control queue
  addq $8, %rbx                             # dispatch: advance the control queue (8-byte tokens)
  testq %rax, %rax                          # dispatch: the end token (0)?
  je done                                   # dispatch: the access program has ended
  jmpq *cases(,%rax,8)                      # dispatch: jump to case A0.<token>
A0.1:
  addq $1, %r10                             # add r10, r10, 1
  imulq $512, %r10, %r9                     # vst v2, @2[r10, r11], v1 (row r10: offset, hoisted)
  addq %rdi, %r9                            # vst v2, @2[r10, r11], v1 (row r10: address, hoisted)
  movq %rsi, %rbp                           # popb @3 (the buffer's base)
  addq $512, %rsi                           # popb @3 (advance the queue past the row: 512 bytes)
  xorl %r11d, %r11d                         # mov r11, r0
R0:                                         # chunk 1 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 2 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 3 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 4 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 5 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 6 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 7 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: chunk 8 of 8
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
  movq $128, %rax                           # vmask v1, r11, r3, 16 (n = bound)
  subq %r11, %rax                           # vmask v1, r11, r3, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v1, r11, r3, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k1              # vmask v1, r11, r3, 16 (lanes k < n)
  vmovups (%rbp,%r11,4), %zmm2 {%k1} {z}    # vld v2, @3[r11], v1
  vmovups %zmm2, (%r9,%r11,4) {%k1}         # vst v2, @2[r10, r11], v1
  addq $16, %r11                            # add r11, r11, r1
  jmp R0                                    # jmp R0
# R0: the exit test
  cmpq $128, %r11                           # bge r11, r3, R1
  jge R1                                    # bge r11, r3, R1
R1:
  jmp dispatch                              # ret
done:
