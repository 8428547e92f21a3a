# Kernel: load_chain
# A pointer chase: 4 x movq (%rax), %rax (each load's address is the last load's value, so the loop runs at
#   the L1 load-to-use latency), then the loop's counter add and compare-and-branch. Not a compiled kernel:
#   a calibration loop for the simulator's per-instruction costs. The comment on each line names the DAE
#   instruction a matching DAE kernel uses for it.
# One iteration: the 4 loads and the loop branch.
# The DAE has no pointers: its kernel chases indices (ld r0, @0[r0], an i64 array holding the next index);
#   x86 follows the pointer itself, the shortest form of the same latency chain.
# Command (from the repository root; samples/gen_mca.py runs it and writes load_chain.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/load_chain.s
# Registers: r0 = %rax; the loop: addq $1 to the counter %r12, cmpq with the limit %r13, jl (blt r12, r13).

L0:
  movq (%rax), %rax                         # ld r0, @0[r0]
  movq (%rax), %rax                         # ld r0, @0[r0]
  movq (%rax), %rax                         # ld r0, @0[r0]
  movq (%rax), %rax                         # ld r0, @0[r0]
  addq $1, %r12                             # add r12, r12, 1
  cmpq %r13, %r12                           # blt r12, r13, L0
  jl L0                                     # blt r12, r13, L0
