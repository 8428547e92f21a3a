# Kernel: int_chain
# A dependent chain of 8 64-bit integer adds (addq $1, %rax), then the loop's counter add and
#   compare-and-branch. Not a compiled kernel: a calibration loop for the simulator's per-instruction costs.
#   The comment on each line names the DAE instruction a matching DAE kernel uses for it.
# One iteration: the 8 adds and the loop branch.
# Command (from the repository root; samples/gen_mca.py runs it and writes int_chain.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/int_chain.s
# Registers: r0 = %rax; the loop: addq $1 to the counter %r12, cmpq with the limit %r13, jl (blt r12, r13).

L0:
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %rax                             # add r0, r0, 1
  addq $1, %r12                             # add r12, r12, 1
  cmpq %r13, %r12                           # blt r12, r13, L0
  jl L0                                     # blt r12, r13, L0
