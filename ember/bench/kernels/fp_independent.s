# Kernel: fp_independent
# 8 independent vector float adds (8 destinations, sources %zmm8 and %zmm9 never written in the loop), then
#   the loop's counter add and compare-and-branch. Not a compiled kernel: a calibration loop for the
#   simulator's per-instruction costs. The comment on each line names the DAE instruction a matching DAE
#   kernel uses for it.
# One iteration: the 8 adds and the loop branch.
# Command (from the repository root; samples/gen_mca.py runs it and writes fp_independent.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/fp_independent.s
# Registers: vN = %zmmN; the loop: addq $1 to the counter %r12, cmpq with the limit %r13, jl (blt r12, r13).

L0:
  vaddps %zmm8, %zmm9, %zmm0                # vfadd.f32 v0, v9, v8
  vaddps %zmm8, %zmm9, %zmm1                # vfadd.f32 v1, v9, v8
  vaddps %zmm8, %zmm9, %zmm2                # vfadd.f32 v2, v9, v8
  vaddps %zmm8, %zmm9, %zmm3                # vfadd.f32 v3, v9, v8
  vaddps %zmm8, %zmm9, %zmm4                # vfadd.f32 v4, v9, v8
  vaddps %zmm8, %zmm9, %zmm5                # vfadd.f32 v5, v9, v8
  vaddps %zmm8, %zmm9, %zmm6                # vfadd.f32 v6, v9, v8
  vaddps %zmm8, %zmm9, %zmm7                # vfadd.f32 v7, v9, v8
  addq $1, %r12                             # add r12, r12, 1
  cmpq %r13, %r12                           # blt r12, r13, L0
  jl L0                                     # blt r12, r13, L0
