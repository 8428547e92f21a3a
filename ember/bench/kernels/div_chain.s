# Kernel: div_chain
# A dependent chain of 4 64-bit signed divides (cqto + idivq %rcx, each dividing the previous quotient by the
#   same divisor), then the loop's counter add and compare-and-branch. Not a compiled kernel: a calibration
#   loop for the simulator's per-instruction costs, the divide's latency where mul_div measures its throughput
#   beside multiplies. The comment on each line names the DAE instruction a matching DAE kernel uses for it.
# One iteration: the 4 divides and the loop branch.
# Each idivq leaves its quotient in %rax, which is the next divide's dividend: cqto sign-extends it into %rdx
#   (idivq divides %rdx:%rax and overwrites %rdx with the remainder, so every divide needs its own cqto), and
#   the last quotient is the next iteration's first dividend, so the chain runs through the whole loop. The
#   divisor %rcx is never written in the loop. The DAE `div` is a floor division and idivq truncates: they
#   agree for the non-negative operands of the matching DAE kernel, so the sign fix-up a general floor
#   division needs is left out.
# Cost: llvm-mca 14 charges idivq %rcx 66 uops and a 102-cycle latency whatever the operands' values (see
#   div_chain.mca.txt), so the chain takes 4 x (102 + 1) cycles an iteration. That is the model's divide:
#   measured hardware of this generation is far faster (uops.info gives DIV r64 14 to 18 cycles of latency on
#   Rocket Lake, whose core is a port of Ice Lake's Sunny Cove).
# Command (from the repository root; samples/gen_mca.py runs it and writes div_chain.mca.txt and mca.json):
#   llvm-mca -mtriple=x86_64-unknown-linux-gnu -mcpu=icelake-server -iterations=1000 ember/bench/kernels/div_chain.s
# Registers: r0 = %rax (the dividend, then each quotient), r2 = %rcx (the divisor); %rdx = the dividend's sign
#   extension, then the remainder; the loop: addq $1 to the counter %r12, cmpq with the limit %r13, jl (blt
#   r12, r13).

L0:
  cqto                                      # div r0, r0, r2 (sign-extend the dividend into %rdx)
  idivq %rcx                                # div r0, r0, r2 (the quotient in %rax)
  cqto                                      # div r0, r0, r2 (sign-extend the dividend into %rdx)
  idivq %rcx                                # div r0, r0, r2 (the quotient in %rax)
  cqto                                      # div r0, r0, r2 (sign-extend the dividend into %rdx)
  idivq %rcx                                # div r0, r0, r2 (the quotient in %rax)
  cqto                                      # div r0, r0, r2 (sign-extend the dividend into %rdx)
  idivq %rcx                                # div r0, r0, r2 (the quotient in %rax)
  addq $1, %r12                             # add r12, r12, 1
  cmpq %r13, %r12                           # blt r12, r13, L0
  jl L0                                     # blt r12, r13, L0
