# Kernel: o3_bag_d128
# Mirrors samples/levels/bag_sum.ts.O3.dae, callback A0.1 (the counting token of each bag: count it in r11
#   and zero output row r11 + 16 ahead of use) with D = 128 (li r2, 128; row stride 512 bytes): the zeroing
#   loop L5..L6 runs 8 times (the case where row r11 + 16 exists, bge r13, r4 not taken).
# One iteration: one callback, dispatch included: add, add, bge, mov, 8 chunks (bge, vmask, vst, add, jmp),
#   the exit bge, ret.
# Command (from the repository root; samples/gen_mca.py runs it and writes o3_bag_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/o3_bag_d128.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (token, vmask's n), %rdi = the output's base
#   (@9); %r9 = the address of output row r11 (@9[r11, 0], kept for A0.2), %rdx = the address of output row
#   r13 (@9[r13, 0]) (see the 2-D references below); r4 = %rcx (the number of bags), r11 = %r11, r13 = %r13,
#   r14 = %r14; v0 = %zmm0 (zeros, splat before the run), v2 = %k2; constant loaded before the loop: %zmm31 =
#   0, 1, ..., 15.
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
#   - add rX, rY, c (a different destination): leaq c(rY), rX, one instruction.
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
#     address arithmetic. In this kernel: row r11 of the output in %r9, computed right after
#     `add r11, r11, r1` (this callback is where r11 changes; A0.2, o3_row_d128, uses %r9 and computes no
#     address); row r13 in %rdx, computed right after `add r13, r11, r5`, once per callback, shared by the 8
#     chunks' vst. (A compiler could also derive row r13's address from row r11's, leaq 8192(%r9), %rdx: one
#     instruction fewer; it is kept as imulq + addq, as every other row.)
#   - vst vS, @sym[rR, rC], vM: vmovups %zmmS, (B,rC,4) {%kM}, B the row's base register (above).

dispatch:                                   # the core's dispatch loop: one turn per control token
  movq (%rbx), %rax                         # dispatch: load the token from the control queue
  addq $8, %rbx                             # dispatch: advance the control queue (8-byte tokens)
  testq %rax, %rax                          # dispatch: the end token (0)?
  je done                                   # dispatch: the access program has ended
  jmpq *cases(,%rax,8)                      # dispatch: jump to case A0.<token>
A0.1:
  addq $1, %r11                             # add r11, r11, r1
  imulq $512, %r11, %r9                     # A0.2's vld v5 / vst v6, @9[r11, r15] (row r11: offset, hoisted)
  addq %rdi, %r9                            # A0.2's vld v5 / vst v6, @9[r11, r15] (row r11: address, hoisted)
  leaq 16(%r11), %r13                       # add r13, r11, r5
  imulq $512, %r13, %rdx                    # vst v0, @9[r13, r14], v2 (row r13: offset, hoisted)
  addq %rdi, %rdx                           # vst v0, @9[r13, r14], v2 (row r13: address, hoisted)
  cmpq %rcx, %r13                           # bge r13, r4, L4
  jge L4                                    # bge r13, r4, L4
  xorl %r14d, %r14d                         # mov r14, r0
L5:                                         # chunk 1 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 2 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 3 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 4 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 5 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 6 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 7 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: chunk 8 of 8
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
  movq $128, %rax                           # vmask v2, r14, r2, 16 (n = bound)
  subq %r14, %rax                           # vmask v2, r14, r2, 16 (n = bound - start)
  vpbroadcastd %eax, %zmm30                 # vmask v2, r14, r2, 16 (n in every lane)
  vpcmpgtd %zmm31, %zmm30, %k2              # vmask v2, r14, r2, 16 (lanes k < n)
  vmovups %zmm0, (%rdx,%r14,4) {%k2}        # vst v0, @9[r13, r14], v2
  addq $16, %r14                            # add r14, r14, r5
  jmp L5                                    # jmp L5
# L5: the exit test
  cmpq $128, %r14                           # bge r14, r2, L6
  jge L6                                    # bge r14, r2, L6
L6:
L4:
  jmp dispatch                              # ret
done:
