# Kernel: sol_regacc_d128
# Speed of light of a sum bag with D = 128 kept in registers: per lookup 8 x (load a 16-lane chunk of the
#   row, add it into one of 8 accumulators), then the pointer advance and compare-and-branch. Not a compiled
#   kernel: a calibration loop for the simulator's per-instruction costs. The comment on each line names the
#   DAE instruction a matching DAE kernel uses for it.
# One iteration: one lookup (one row of 128 f32).
# Form: a separate vmovups + vaddps per chunk, as the DAE pair vld + vfadd is (the DAE ISA has no load-op
#   fusion). llvm-mca 14 models a separate zmm load as 2 uops, one of them on port 0, 1 or 5, and gives this
#   form 5.35 cycles per iteration; the fused form (vaddps with the chunk as its memory operand) takes 4.0,
#   8 adds on the 2 FP ports, which is the bound ember's sol.execute_cycles uses. Loads are unmasked (every
#   chunk is full; the DAE kernel's mask is all on).
# Command (from the repository root; samples/gen_mca.py runs it and writes sol_regacc_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/sol_regacc_d128.s
# Registers: %rsi = the row (@0 at row r1), %rdx = the end of the rows; v0-v7 = %zmm0-%zmm7 (the
#   accumulators).

L0:                                         # one lookup: 8 chunks of a 512-byte row
  vmovups 0(%rsi), %zmm8                    # vld v20, @1[0], v9
  vaddps %zmm8, %zmm0, %zmm0                # vfadd.f32 v10, v10, v20
  vmovups 64(%rsi), %zmm9                   # vld v21, @1[16], v9
  vaddps %zmm9, %zmm1, %zmm1                # vfadd.f32 v11, v11, v21
  vmovups 128(%rsi), %zmm10                 # vld v22, @1[32], v9
  vaddps %zmm10, %zmm2, %zmm2               # vfadd.f32 v12, v12, v22
  vmovups 192(%rsi), %zmm11                 # vld v23, @1[48], v9
  vaddps %zmm11, %zmm3, %zmm3               # vfadd.f32 v13, v13, v23
  vmovups 256(%rsi), %zmm12                 # vld v24, @1[64], v9
  vaddps %zmm12, %zmm4, %zmm4               # vfadd.f32 v14, v14, v24
  vmovups 320(%rsi), %zmm13                 # vld v25, @1[80], v9
  vaddps %zmm13, %zmm5, %zmm5               # vfadd.f32 v15, v15, v25
  vmovups 384(%rsi), %zmm14                 # vld v26, @1[96], v9
  vaddps %zmm14, %zmm6, %zmm6               # vfadd.f32 v16, v16, v26
  vmovups 448(%rsi), %zmm15                 # vld v27, @1[112], v9
  vaddps %zmm15, %zmm7, %zmm7               # vfadd.f32 v17, v17, v27
  addq $512, %rsi                           # add r12, r12, 1 (the next row)
  cmpq %rdx, %rsi                           # blt r12, r13, L0
  jb L0                                     # blt r12, r13, L0
