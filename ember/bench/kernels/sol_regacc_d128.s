# Kernel: sol_regacc_d128
# Speed of light of a sum bag with D = 128 kept in registers: per lookup 8 x (load a 16-lane chunk of the
#   row, add it into one of 8 accumulators), then the pointer advance and compare-and-branch. Not a compiled
#   kernel: a calibration loop for the simulator's per-instruction costs. The comment on each line names the
#   DAE instruction a matching DAE kernel uses for it.
# One iteration: one lookup (one row of 128 f32).
# Form: vaddps with the chunk as its memory operand (a micro-fused load + add), the fastest x86 form; each
#   one stands for the DAE pair vld + vfadd. Not a separate vmovups + vaddps per chunk: llvm-mca 14 models a
#   separate zmm load as 2 uops, one of them on port 0, 1 or 5 where the vaddps go, and gives that form 5.35
#   cycles per iteration (16 uops on 3 ports) against 4.0 for this one (8 loads on 2 load ports, 8 adds on 2
#   FP ports), so it would measure that model's load cost rather than the bound. Loads are unmasked (every
#   chunk is full; the DAE kernel's mask v16 is all on).
# Command (from the repository root; samples/gen_mca.py runs it and writes sol_regacc_d128.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/sol_regacc_d128.s
# Registers: %rsi = the row (@0 at row r1), %rdx = the end of the rows; v0-v7 = %zmm0-%zmm7 (the
#   accumulators).

L0:                                         # one lookup: 8 chunks of a 512-byte row
  vaddps 0(%rsi), %zmm0, %zmm0              # vld v8, @0[r1, 0], v16 + vfadd.f32 v0, v0, v8
  vaddps 64(%rsi), %zmm1, %zmm1             # vld v8, @0[r1, 16], v16 + vfadd.f32 v1, v1, v8
  vaddps 128(%rsi), %zmm2, %zmm2            # vld v8, @0[r1, 32], v16 + vfadd.f32 v2, v2, v8
  vaddps 192(%rsi), %zmm3, %zmm3            # vld v8, @0[r1, 48], v16 + vfadd.f32 v3, v3, v8
  vaddps 256(%rsi), %zmm4, %zmm4            # vld v8, @0[r1, 64], v16 + vfadd.f32 v4, v4, v8
  vaddps 320(%rsi), %zmm5, %zmm5            # vld v8, @0[r1, 80], v16 + vfadd.f32 v5, v5, v8
  vaddps 384(%rsi), %zmm6, %zmm6            # vld v8, @0[r1, 96], v16 + vfadd.f32 v6, v6, v8
  vaddps 448(%rsi), %zmm7, %zmm7            # vld v8, @0[r1, 112], v16 + vfadd.f32 v7, v7, v8
  addq $512, %rsi                           # add r1, r1, 1 (the next row)
  cmpq %rdx, %rsi                           # blt r1, r2, L0
  jb L0                                     # blt r1, r2, L0
