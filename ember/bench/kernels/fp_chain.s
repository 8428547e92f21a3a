# Kernel: fp_chain
# A dependent chain of vector float adds: 4 x vaddps %zmm0, %zmm1, %zmm0 (each needs the last), then the
#   loop's counter add and compare-and-branch. Not a compiled kernel: a calibration loop for the simulator's
#   per-instruction costs. The comment on each line names the DAE instruction a matching DAE kernel uses for
#   it.
# One iteration: the 4 adds and the loop branch.
# Command (from the repository root; samples/gen_mca.py runs it and writes fp_chain.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/fp_chain.s
# Registers: vN = %zmmN; the loop: addq $1 to the counter %r12, cmpq with the limit %r13, jl (blt r12, r13).

L0:
  vaddps %zmm0, %zmm1, %zmm0                # vfadd.f32 v0, v1, v0
  vaddps %zmm0, %zmm1, %zmm0                # vfadd.f32 v0, v1, v0
  vaddps %zmm0, %zmm1, %zmm0                # vfadd.f32 v0, v1, v0
  vaddps %zmm0, %zmm1, %zmm0                # vfadd.f32 v0, v1, v0
  addq $1, %r12                             # add r12, r12, 1
  cmpq %r13, %r12                           # blt r12, r13, L0
  jl L0                                     # blt r12, r13, L0
