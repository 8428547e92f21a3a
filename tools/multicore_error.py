"""How far the multi-core model (sim/multicore.py: cores in rounds, rounds.py) lands from the interleaved one
(sim/interleave.py), and from itself with rounds a quarter as long.

Runs a few quick-scale workloads with 256 bags, split over 2, 4 and 8 cores of the default machine (one LLC and
the DRAM shared), at O3 and core-only, and prints cycles, LLC hit rate and DRAM bytes of each model with the
rounds model's errors.  Usage:

    python tools/multicore_error.py [--cores 2,4,8] [--only RM1_L0,RM3_L2]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from ember.bench.run import compile_variant
from ember.bench.workloads import suite
from ember.machine import load_machine
from ember.sim.interleave import simulate_interleaved
from ember.sim.multicore import simulate_cores, split_bags
from ember.sim.rounds import QUANTUM

WORKLOADS = ("RM1_L0", "RM3_L0", "RM3_L2", "MP_wiki-Talk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="2,4,8")
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--bags", type=int, default=256)
    args = parser.parse_args()
    fine = QUANTUM / 4
    print(f"| workload | variant | cores | cycles, rounds of {QUANTUM:.0f} | of {fine:.0f} | interleaved | error "
          f"against interleaved | against rounds of {fine:.0f} | LLC hit rate, rounds / int | DRAM MB, rounds / int |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    start = time.monotonic()
    for name in args.only.split(","):
        w = dataclasses.replace(suite("quick", [name])[0], bags=args.bags)
        inputs = w.inputs(0)
        table = w.table(0, inputs["indices"])
        for variant in ("O3", "core"):
            for cores in map(int, args.cores.split(",")):
                m = load_machine("default").set("cores", str(cores))
                slices = split_bags(inputs, cores)
                programs = []
                for part in slices:
                    p = compile_variant(dataclasses.replace(w, bags=len(part["offsets"]) - 1), variant)
                    for n, s in enumerate(p.symbols):
                        if s.kind == "param":
                            p.data[n] = table
                    programs.append(p)
                _, seq = simulate_cores(programs, slices, m, engine="fast")  # the engines agree
                _, finer = simulate_cores(programs, slices, m, engine="fast", quantum=fine)
                _, inter = simulate_interleaved(programs, slices, m)
                err = seq["cycles"] / inter["cycles"] - 1
                print(f"| {name} | {variant} | {cores} | {seq['cycles']:,.0f} | {finer['cycles']:,.0f} | "
                      f"{inter['cycles']:,.0f} | {err:+.1%} | {seq['cycles'] / finer['cycles'] - 1:+.1%} | "
                      f"{seq['cache.llc.hits'] / max(seq['cache.llc.hits'] + seq['cache.llc.misses'], 1):.3f} / "
                      f"{inter['cache.llc.hits'] / max(inter['cache.llc.hits'] + inter['cache.llc.misses'], 1):.3f} | "
                      f"{seq['dram_bytes'] / 1e6:.2f} / {inter['dram_bytes'] / 1e6:.2f} |", flush=True)
    print(f"in {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
