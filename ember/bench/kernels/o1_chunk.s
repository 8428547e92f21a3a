# Kernel: o1_chunk
# Mirrors the -O1 callback of a sum bag with D = 16 (ember.bench.mca builds it: one callback per 16-lane
#   chunk, row stride 64 bytes). The sample's D = 8 rows now get 8-lane heads at -O1 (vectorize gives a
#   narrow row the fewest lanes that cover it), so the 16-lane form is measured on rows of 16.
# One iteration: one callback, dispatch included (pops of mask, bag, index vector and value vector; vgather,
#   vfadd, vscatter).
# Command (from the repository root; samples/gen_mca.py runs it and writes o1_chunk.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/o1_chunk.s
# Registers: operand queue %rsi, control queue %rbx, scratch %rax (token, vmask's n), %rdi = the output's base
#   (@9), %rdx = the address of output row r8 (@9[r8, 0], see the 2-D references below); r8 = %r8; vN = %zmmN
#   as data and %kN as a mask; %k6, %k7 = copies of the mask that the gather and scatter consume; constants
#   loaded before the loop: %zmm29 = 0, 2, ..., 30 (the vpermt2d selector).
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
#   - pop vX (a mask): kmovw (%rsi) + addq $8 (a 16-lane mask packs into one 8-byte word).
#   - pop vX (16 x f32): vmovups (%rsi) + addq $64.
#   - pop vX (an index vector): the access unit pushes 16 x i64 (128 bytes). A zmm holds 16 dwords, so
#     vmovdqu64 loads lanes 0-7 and vpermt2d with the selector zmm29 = 0, 2, ..., 30 takes the low dword of
#     lanes 8-15 from the next 64 bytes (column indices are < 2^31); addq $128. Shorter than 2 x vpmovqd +
#     vinserti64x4, and it lets one vgatherdps/vscatterdps serve all 16 lanes (i64 lanes need two 8-lane
#     vgatherqps/vscatterqps and a vinsertf32x8/vextractf32x8).
#   - A 2-D reference @sym[rR, rC] has no x86 addressing mode (the row stride D x 4 bytes is not a scale of 1,
#     2, 4 or 8): imulq $stride, rR, B + addq base, B give the row's address in a base register B, then the
#     reference is (B,rC,4); imulq + addq is the shortest sequence (movq + shlq + addq is one more). Row bases
#     hoisted as a compiler would: computed where the row register changes. A row's address is computed once
#     per value of its row register, at the place where that register is written, and every reference to the
#     row shares its one base register, as LLVM at -O2 does (loop-invariant code motion and
#     common-subexpression elimination); the DAE core's 2-D reference is one instruction with no separate
#     address arithmetic. In this kernel: row r8 of the output in %rdx, computed right after `pop r8` (where
#     r8 is written), once per call; the vgather and the vscatter share it.
#   - vfadd.f32 vD, vA, vB: vaddps %zmmB, %zmmA, %zmmD (unmasked, as the DAE op).
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
  kmovw (%rsi), %k3                         # pop v3
  addq $8, %rsi                             # pop v3 (advance the queue: one mask word)
  movq (%rsi), %r8                          # pop r8
  addq $8, %rsi                             # pop r8 (advance the queue: i64)
  imulq $64, %r8, %rdx                      # vgather v6 / vscatter v7, @9[r8, v4], v3 (row r8: offset, hoisted)
  addq %rdi, %rdx                           # vgather v6 / vscatter v7, @9[r8, v4], v3 (row r8: address, hoisted)
  vmovdqu64 (%rsi), %zmm4                   # pop v4 (lanes 0-7 as i64)
  vpermt2d 64(%rsi), %zmm29, %zmm4          # pop v4 (each lane's low dword)
  addq $128, %rsi                           # pop v4 (advance the queue: 16 x i64)
  vmovups (%rsi), %zmm5                     # pop v5
  addq $64, %rsi                            # pop v5 (advance the queue: 16 x f32)
  kmovw %k3, %k6                            # vgather v6, @9[r8, v4], v3 (the gather clears its mask: a copy)
  vpxord %zmm6, %zmm6, %zmm6                # vgather v6, @9[r8, v4], v3 (masked-off lanes 0)
  vgatherdps (%rdx,%zmm4,4), %zmm6 {%k6}    # vgather v6, @9[r8, v4], v3
  vaddps %zmm5, %zmm6, %zmm7                # vfadd.f32 v7, v6, v5
  kmovw %k3, %k7                            # vscatter v7, @9[r8, v4], v3 (the scatter clears its mask: a copy)
  vscatterdps %zmm7, (%rdx,%zmm4,4) {%k7}   # vscatter v7, @9[r8, v4], v3
  jmp dispatch                              # ret
done:
