"""Multi-core runs: the batch split across cores, the last cache level and DRAM shared."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ember.bench.run import compile_variant, run
from ember.bench.workloads import Workload, suite
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import simulate
from ember.sim.multicore import simulate_cores, split_bags, split_rows

HOST_TIME = ("host_seconds", "sim_cycles_per_host_second", "lookups_per_host_second")


def programs_for(w: Workload, slices: list[dict[str, np.ndarray]], variant: str) -> list:
    out = []
    for part in slices:
        sub = dataclasses.replace(w, bags=len(part["offsets"]) - 1)
        p = compile_variant(sub, variant)
        for n, s in enumerate(p.symbols):
            if s.kind == "param":
                p.data[n] = w.table(0)
        out.append(p)
    return out


@pytest.mark.parametrize(("cores", "variant", "channels"), [(2, "O3", 1), (3, "O0", 1), (2, "hand", 1), (4, "core", 1),
                                                         (3, "O3", 5)])
def test_cores_split_the_batch_and_both_engines_agree(cores: int, variant: str, channels: int) -> None:
    w = suite("tiny", ["RM2_L1"])[0]
    m1 = load_machine("default").with_overrides([f"dram.channels={channels}"])
    m = m1.with_overrides([f"cores={cores}"])
    inputs = w.inputs(0)
    slices = split_bags(inputs, cores)
    programs = programs_for(w, slices, variant)
    ref_outs, ref = simulate_cores(programs, slices, m, engine="reference")
    outs, st = simulate_cores(programs, slices, m, engine="fast")
    assert list(st) == list(ref)
    assert {k: st[k] for k in st if not k.endswith(HOST_TIME)} == {k: ref[k] for k in ref if not k.endswith(HOST_TIME)}
    whole = np.concatenate([o["output"] for o in outs])
    np.testing.assert_allclose(whole, w.reference(0), rtol=1e-4, atol=1e-4)
    single = programs_for(w, [inputs], variant)[0]
    _, one = simulate(single, inputs, m1)
    assert st["cores"] == cores
    assert st["cycles"] == max(st[f"core{k}.cycles"] for k in range(cores)) < one["cycles"]
    assert st["lookups"] == sum(st[f"core{k}.lookups"] for k in range(cores)) == one["lookups"]
    assert st["core1.cache.llc.hits"] > 0  # the second core finds rows the first one brought in


def test_a_shared_dram_limits_the_gain() -> None:
    w = suite("tiny", ["RM3_L0"])[0]
    inputs = w.inputs(0)
    slices = split_bags(inputs, 2)
    programs = programs_for(w, slices, "O3")
    gains = []
    for bandwidth in ("64", "0.5"):
        m1 = load_machine("default").with_overrides(["dram.device=ideal", f"dram.bytes_per_cycle={bandwidth}"])
        m2 = m1.with_overrides(["cores=2"])
        _, one = simulate(programs_for(w, [inputs], "O3")[0], inputs, m1)
        _, two = simulate_cores(programs, slices, m2)
        gains.append(one["cycles"] / two["cycles"])
    assert gains[0] > 1.3 and gains[1] < 1.15, gains


def test_splits() -> None:
    inputs = {"indices": np.arange(10), "offsets": np.array([0, 3, 3, 7, 10]), "weights": np.arange(10.0)}
    parts = split_bags(inputs, 2)
    assert [list(p["offsets"]) for p in parts] == [[0, 3, 3], [0, 4, 7]]
    assert [list(p["indices"]) for p in parts] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]
    assert list(parts[1]["weights"]) == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert [list(p["indices"]) for p in split_rows({"indices": np.arange(5)}, 2)] == [[0, 1], [2, 3, 4]]
    assert [list(p["offsets"]) for p in split_bags(inputs, 5)] == [[0, 3], [0, 0], [0, 4], [0, 3]]  # one idle
    assert len(split_rows({"indices": np.arange(2)}, 3)) == 2


def test_cores_beyond_the_batch_stay_idle() -> None:
    """Two bags on a three-core machine: two cores work, the third idles, and the result is still right."""
    from ember.bench.run import run

    w = dataclasses.replace(suite("tiny", ["RM1_L0"])[0], bags=2)
    m = load_machine("default").with_overrides(["cores=3"])
    slices = split_bags(w.inputs(0), 3)
    outs, st = simulate_cores(programs_for(w, slices, "O3"), slices, m)
    np.testing.assert_allclose(np.concatenate([o["output"] for o in outs]), w.reference(0), rtol=1e-4, atol=1e-4)
    assert st["cores"] == 2 and "core1.cycles" in st and "core2.cycles" not in st
    assert run(w, "O3", m).stats["cycles"] == st["cycles"]  # the benchmark splits it the same way


def test_a_single_run_refuses_a_multicore_machine() -> None:
    w = suite("tiny", ["RM1_L0"])[0]
    p = programs_for(w, [w.inputs(0)], "O3")[0]
    with pytest.raises(EmberError, match="2 cores"):
        simulate(p, w.inputs(0), load_machine("default").with_overrides(["cores=2"]))
    with pytest.raises(EmberError, match="split into 3 slices"):
        simulate_cores([p] * 3, [w.inputs(0)] * 3, load_machine("default").with_overrides(["cores=2"]))


@pytest.mark.parametrize("name", ["RM1_L2", "KG_biokg", "MP_web-Google"])
def test_the_benchmark_splits_its_workloads(name: str) -> None:
    """bench.run checks the stitched outputs against numpy; two cores finish sooner than one."""
    from ember.bench.run import run

    w = suite("tiny", [name])[0]
    m = load_machine("default")
    one = run(w, "O3", m)
    two = run(w, "O3", m.with_overrides(["cores=2"]))
    assert two.stats["cycles"] < one.stats["cycles"]
    assert two.stats["dram_bytes"] > 0 and 0 < two.stats["roofline_fraction"] <= 1.0
    # every row says when the first and the last core halt; one core halts at the run's cycles
    assert one.stats["cores.min_cycles"] == one.stats["cores.max_cycles"] == one.stats["cycles"]
    assert 0 < two.stats["cores.min_cycles"] <= two.stats["cores.max_cycles"] == two.stats["cycles"]


def test_the_interleaved_model_on_one_core_is_the_single_core_run() -> None:
    from ember.sim.interleave import simulate_interleaved
    from ember.sim.reference import simulate as reference

    w = suite("tiny", ["RM2_L1"])[0]
    inputs = w.inputs(0)
    [program] = programs_for(w, [inputs], "O3")
    m = load_machine("default")
    outs, st = simulate_interleaved([program], [inputs], m)
    out, one = reference(program, inputs, m)
    np.testing.assert_array_equal(outs[0]["output"], out["output"])
    for name, stat in one.items():
        if not name.endswith(HOST_TIME) and not name.startswith(("sol", "energy", "power_w")):
            assert st[f"core0.{name}"] == stat.value, name


def test_interleaved_cores_share_the_last_level_while_they_run_and_agree_with_numpy() -> None:
    """Four cores on one 8 MiB LLC and 32 B/cycle of DRAM: the same run twice gives the same cycles; the
    outputs are numpy's; the LLC sees the lookups the sequential model gives it (private levels change
    state in call order, which both models keep per core), while when they hit depends on the model."""
    from ember.sim.interleave import simulate_interleaved

    w = dataclasses.replace(suite("tiny", ["RM2_L1"])[0], bags=32)
    inputs = w.inputs(0)
    slices = split_bags(inputs, 4)
    programs = programs_for(w, slices, "O3")
    m = load_machine("default").with_overrides(["cores=4"])
    outs, st = simulate_interleaved(programs, slices, m)
    _, again = simulate_interleaved(programs, slices, m)
    assert st["cycles"] == again["cycles"] and st["cache.llc.hits"] == again["cache.llc.hits"]
    np.testing.assert_allclose(np.concatenate([o["output"] for o in outs]), w.reference(0), rtol=1e-4, atol=1e-4)
    _, seq = simulate_cores(programs, slices, m, engine="reference")
    for k in range(4):
        assert (st[f"core{k}.cache.llc.hits"] + st[f"core{k}.cache.llc.misses"]
                == seq[f"core{k}.cache.llc.hits"] + seq[f"core{k}.cache.llc.misses"] > 0)
    assert st["cycles"] == max(st[f"core{k}.cycles"] for k in range(4))


def test_bookings_that_outgrow_their_room_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast engine starts each DRAM channel with a little room for bookings and keeps every booking, as the
    reference does, so the room must grow (runtime.h, channel_grow), on one core and on cores that share DRAM, and
    the runs still agree with the reference engine.  (It once pruned bookings it took to be too old to matter,
    but a request can come earlier in simulated time than one already booked: with a room of 8 the engines
    then disagreed on one core.)"""
    from ember.sim.fast import engine as fast_engine

    monkeypatch.setattr(fast_engine, "DRAM_ROOM", 8)
    monkeypatch.setattr(fast_engine, "DRAM_ROOM_MIN", 2)
    w = suite("tiny", ["RM2_L1"])[0]
    for cores, channels in ((1, 1), (1, 3), (3, 3)):
        m = load_machine("default").with_overrides([f"cores={cores}", f"dram.channels={channels}"])
        slices = split_bags(w.inputs(0), cores)
        programs = programs_for(w, slices, "O3")
        _, ref = simulate_cores(programs, slices, m, engine="reference")
        _, st = simulate_cores(programs, slices, m, engine="fast")
        timed = [k for k in ref if not k.endswith(HOST_TIME)]
        assert [st[k] for k in timed] == [ref[k] for k in timed], (cores, channels)
        assert st["dram.requests"] > 8  # more than the room the channels started with


def test_rounds_take_turns_in_round_order_starting_with_a_different_core_each_round() -> None:
    """Three cores in rounds of 100 cycles: round r starts with core r mod 3; a core that calls at a later round's
    time waits for every core that wants an earlier round; one that leaves passes its turn on."""
    import threading

    from ember.sim.rounds import Rounds

    rounds, order = Rounds(3, 100.0), []
    plans = {0: [50, 120, 330], 1: [250], 2: [101, 205]}  # the times each core calls at, in its order

    def core(k: int) -> None:
        end = rounds.wait(k)
        order.append((k, 0))
        for t in plans[k]:
            if t >= end:
                end = rounds.sync(k, t)
                order.append((k, int(t // 100)))
        rounds.leave(k)

    threads = [threading.Thread(target=core, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    rounds.begin()
    for th in threads:
        th.join(timeout=30)
    # round 0: cores 0, 1, 2.  Core 2 wants round 1 first (0 wants it too, 1 wants round 2) and round 1 starts
    # with core 1, so core 2 goes on, then 0; round 2 starts with core 2, then 1; core 0 alone in round 3
    assert order == [(0, 0), (1, 0), (2, 0), (2, 1), (0, 1), (2, 2), (1, 2), (0, 3)]


def test_bandwidth_bound_cores_finish_together() -> None:
    """Cores at the same time share the DRAM fairly: eight cores of a DRAM-bound gather on one DDR5 sub-channel
    finish within 10% of each other (served one after another, the first finished in a third of the last one's
    time: 12,522 cycles against 35,666)."""
    w = dataclasses.replace(suite("tiny", ["KG_wikikg2"])[0], bags=512)
    st = run(w, "O3", load_machine("default").with_overrides(["cores=8", "dram.channels=1"])).stats
    assert st["dram_bandwidth_fraction"] > 0.5  # bound by DRAM
    assert st["cores.max_cycles"] <= 1.1 * st["cores.min_cycles"]
