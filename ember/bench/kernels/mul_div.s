# Kernel: mul_div
# A mix: 2 independent 64-bit multiplies, 1 64-bit signed divide with its usual setup (movq the dividend
#   into %rax, cqto), then the loop's counter add and compare-and-branch. Not a compiled kernel: a
#   calibration loop for the simulator's per-instruction costs. The comment on each line names the DAE
#   instruction a matching DAE kernel uses for it.
# One iteration: the 2 multiplies, the divide and the loop branch.
# The multiplies are the three-operand imulq $imm, src, dst: both read only %rdi, which the loop never
#   writes, so they depend neither on each other nor on the last iteration; the divide reads %rdi and %rcx
#   only, so the iterations do not chain through it either. The DAE `div` is a floor division and idivq
#   truncates: they agree for the non-negative operands of the matching DAE kernel, so the sign fix-up a
#   general floor division needs is left out.
# Command (from the repository root; samples/gen_mca.py runs it and writes mul_div.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/mul_div.s
# Registers: r1 = %rdi, r2 = %rcx (the divisor), r8 = %r8, r9 = %r9, r10 = %rax; the loop: addq $1 to the
#   counter %r12, cmpq with the limit %r13, jl (blt r12, r13).

L0:
  imulq $3, %rdi, %r8                       # mul r8, r1, 3
  imulq $5, %rdi, %r9                       # mul r9, r1, 5
  movq %rdi, %rax                           # div r10, r1, r2 (the dividend into %rax)
  cqto                                      # div r10, r1, r2 (sign-extend it into %rdx)
  idivq %rcx                                # div r10, r1, r2 (the quotient in %rax)
  addq $1, %r12                             # add r12, r12, 1
  cmpq %r13, %r12                           # blt r12, r13, L0
  jl L0                                     # blt r12, r13, L0
