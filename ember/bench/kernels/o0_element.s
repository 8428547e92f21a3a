# Kernel: o0_element
# Mirrors samples/levels/bag_sum.ts.dae, callback A0.1 (-O0: one callback per embedding element), with the
#   sample's D = 8 (output @9 is [6, 8]).
# One iteration: one callback, dispatch included (3 pops, a scalar load, fadd, a scalar store).
# Command (from the repository root; samples/gen_mca.py runs it and writes o0_element.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/o0_element.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (token, vmask's n), %rdx (the element offset
#   of @9[r7, r8]), %rdi = the output's base (@9); r7 = %rcx, r8 = %r8, fN = %xmmN.
# Translation of each DAE instruction (the comment on every line names the one it implements):
#   - dispatch (one turn of the core's dispatch loop; the simulator charges it as `execute.dispatch`): movq
#     loads the token from the control queue (%rbx), addq $8 advances it (tokens are 8 bytes,
#     ember/sim/queue.py TOKEN_BYTES), testq + je test for the end token (0: case numbers start at 1), jmpq
#     *cases(,%rax,8) jumps to case A0.<token>. The table `cases` and the label `done` only need to
#     assemble: llvm-mca ignores control flow.
#   - ret: jmp back to the dispatch loop.
#   - pop rX: the operand queue (memory-mapped in the core's private L2 on the TMU) is read through %rsi:
#     movq (%rsi) + addq of the operand's queue size, as ember/sim/access.py `width` gives it (8 bytes for
#     an i64 or a traversal index).
#   - pop fX: vmovss (%rsi) + addq $4 (an f32 operand takes 4 bytes of the queue).
#   - A 2-D reference @sym[rR, rC] with D = 8 columns: leaq (rC,rR,8), %rdx gives the element offset rR x 8 +
#     rC, then (base,%rdx,4). Row bases hoisted as a compiler would: computed where the row register changes.
#     A row's address is computed once per value of its row register, at the place where that register is
#     written, and every reference to the row shares its one base register, as LLVM at -O2 does
#     (loop-invariant code motion and common-subexpression elimination); the DAE core's 2-D reference is one
#     instruction with no separate address arithmetic. In this kernel the row register r7 and the column r8
#     are both popped by this callback, and with D = 8 the whole element offset is one leaq (a row base alone
#     would take two, imulq + addq), so that one leaq is computed once, after the pops, and shared by the ld
#     and the st (it was one leaq each).
#   - ld fD, @sym[rR, rC]: vmovss (base,%rdx,4), %xmmD, %rdx the shared element offset (above).
#   - st fS, @sym[rR, rC]: vmovss %xmmS, (base,%rdx,4), %rdx the shared element offset (above).
#   - fadd.f32 fD, fA, fB: vaddss %xmmB, %xmmA, %xmmD.

dispatch:                                   # the core's dispatch loop: one turn per control token
  movq (%rbx), %rax                         # dispatch: load the token from the control queue
  addq $8, %rbx                             # dispatch: advance the control queue (8-byte tokens)
  testq %rax, %rax                          # dispatch: the end token (0)?
  je done                                   # dispatch: the access program has ended
  jmpq *cases(,%rax,8)                      # dispatch: jump to case A0.<token>
A0.1:
  movq (%rsi), %rcx                         # pop r7
  addq $8, %rsi                             # pop r7 (advance the queue: i64)
  movq (%rsi), %r8                          # pop r8
  addq $8, %rsi                             # pop r8 (advance the queue: i64)
  vmovss (%rsi), %xmm1                      # pop f1
  addq $4, %rsi                             # pop f1 (advance the queue: f32)
  leaq (%r8,%rcx,8), %rdx                   # ld f2 / st f3, @9[r7, r8] (element offset, shared)
  vmovss (%rdi,%rdx,4), %xmm2               # ld f2, @9[r7, r8]
  vaddss %xmm1, %xmm2, %xmm3                # fadd.f32 f3, f2, f1
  vmovss %xmm3, (%rdi,%rdx,4)               # st f3, @9[r7, r8]
  jmp dispatch                              # ret
done:
