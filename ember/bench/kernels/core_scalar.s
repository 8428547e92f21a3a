# Kernel: core_scalar
# Mirrors the core-only scalar code (no access unit) of `ember-opt --pass=lower-emb,codegen
#   samples/levels/bag_sum.ts.emb.eir`, innermost loop L8..L9, with the sample's D = 8 (table @8 is [40, 8],
#   output @9 is [6, 8]).
# One iteration: one element (bge, ld table, ld out, fadd, st out, add, jmp).
# Command (from the repository root; samples/gen_mca.py runs it and writes core_scalar.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/core_scalar.s
# Registers: %rsi = the table's base (@8), %rdi = the output's base (@9); %r9 = the address of table row r12
#   (@8[r12, 0]) and %r10 = the address of output row r7 (@9[r7, 0]), both set before this loop (see the 2-D
#   references below); r7 = %rcx (the bag), r12 = %r12 (the looked-up row), r13 = %r13; fN = %xmmN.
# Translation of each DAE instruction (the comment on every line names the one it implements):
#   - bge a, b, L: cmpq b, a + jge L (a macro-fused pair).
#   - jmp L: jmp L.
#   - A DAE register that only holds an `li` constant is an immediate: r0 = 0, r1 = 1 (16 in the
#     hand-written code), r5/r6 = 16, and the row width D (r2 in compiled code, r3 = `dim` in the
#     hand-written code), which is a constant of each kernel.
#   - add rX, rX, c: addq in place.
#   - A 2-D reference @sym[rR, rC] with D = 8 columns: the row's address base + rR x 32 in a base register B,
#     then the reference is (B,rC,4). Row bases hoisted as a compiler would: computed where the row register
#     changes. A row's address is computed once per value of its row register, at the place where that
#     register is written, and every reference to the row shares its one base register, as LLVM at -O2 does
#     (loop-invariant code motion and common-subexpression elimination); the DAE core's 2-D reference is one
#     instruction with no separate address arithmetic. In this kernel both rows are fixed across the element
#     loop L8..L9: row r12 of the table in %r9 is computed where r12 is set (`ld r12, @0[r11]` in the lookup
#     loop L6..L7), row r7 of the output in %r10 where r7 is set (the bag loop L4..L5), both outside this
#     kernel, so no address arithmetic is part of the iteration (it was 3 leaq, one per reference); the ld and
#     the st of row r7 share %r10.
#   - ld fD, @sym[rR, rC]: vmovss (B,rC,4), %xmmD, B the row's base register (above).
#   - st fS, @sym[rR, rC]: vmovss %xmmS, (B,rC,4), B the row's base register (above).
#   - fadd.f32 fD, fA, fB: vaddss %xmmB, %xmmA, %xmmD.

L8:                                         # one element
  cmpq $8, %r13                             # bge r13, r2, L9
  jge L9                                    # bge r13, r2, L9
  vmovss (%r9,%r13,4), %xmm1                # ld f1, @8[r12, r13]
  vmovss (%r10,%r13,4), %xmm2               # ld f2, @9[r7, r13]
  vaddss %xmm1, %xmm2, %xmm3                # fadd.f32 f3, f2, f1
  vmovss %xmm3, (%r10,%r13,4)               # st f3, @9[r7, r13]
  addq $1, %r13                             # add r13, r13, r1
  jmp L8                                    # jmp L8
L9:
