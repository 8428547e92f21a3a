# Kernel: core_scalar
# Mirrors the core-only scalar code (no access unit) of `ember-opt --pass=lower-emb,codegen
#   samples/levels/bag_sum.ts.emb.eir`, innermost loop L8..L9, with the sample's D = 8 (table @8 is [40, 8],
#   output @9 is [6, 8]).
# One iteration: one element (bge, ld table, ld out, fadd, st out, add, jmp).
# Command (from the repository root; samples/gen_mca.py runs it and writes core_scalar.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/core_scalar.s
# Registers: %rsi = the table's base (@8), %rdi = the output's base (@9), scratch %rdx (element offsets); r7
#   = %rcx (the bag), r12 = %r12 (the looked-up row), r13 = %r13; fN = %xmmN.
# Translation of each DAE instruction (the comment on every line names the one it implements):
#   - bge a, b, L: cmpq b, a + jge L (a macro-fused pair).
#   - jmp L: jmp L.
#   - A DAE register that only holds an `li` constant is an immediate: r0 = 0, r1 = 1 (16 in the
#     hand-written code), r5/r6 = 16, and the row width D (r2 in compiled code, r3 = `dim` in the
#     hand-written code), which is a constant of each kernel.
#   - add rX, rX, c: addq in place.
#   - A 2-D reference @sym[rR, rC] with D = 8 columns: leaq (rC,rR,8), %rdx gives the element offset rR x 8
#     + rC, then (base,%rdx,4). Done at every DAE memory instruction (not shared between the ld and the st
#     of one element: the DAE code computes it in each).
#   - ld fD, @sym[rR, rC]: the element offset (leaq, above), then vmovss (base,%rdx,4), %xmmD.
#   - st fS, @sym[rR, rC]: the element offset (leaq, above), then vmovss %xmmS, (base,%rdx,4).
#   - fadd.f32 fD, fA, fB: vaddss %xmmB, %xmmA, %xmmD.

L8:                                         # one element
  cmpq $8, %r13                             # bge r13, r2, L9
  jge L9                                    # bge r13, r2, L9
  leaq (%r13,%r12,8), %rdx                  # ld f1, @8[r12, r13] (element offset)
  vmovss (%rsi,%rdx,4), %xmm1               # ld f1, @8[r12, r13]
  leaq (%r13,%rcx,8), %rdx                  # ld f2, @9[r7, r13] (element offset)
  vmovss (%rdi,%rdx,4), %xmm2               # ld f2, @9[r7, r13]
  vaddss %xmm1, %xmm2, %xmm3                # fadd.f32 f3, f2, f1
  leaq (%r13,%rcx,8), %rdx                  # st f3, @9[r7, r13] (element offset)
  vmovss %xmm3, (%rdi,%rdx,4)               # st f3, @9[r7, r13]
  addq $1, %r13                             # add r13, r13, r1
  jmp L8                                    # jmp L8
L9:
