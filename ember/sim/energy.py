"""Energy and power of a run, from the counters both engines report and the machine's `[energy]` section.

Energy is a linear function of counts the simulator already keeps (uops and pipe uses, cache lookups and
fills, stream elements, queue bytes, DRAM activates and lines, or bytes for ideal DRAM, host flops) plus
static power over the simulated time (DRAM's standby and refresh from its device: sim/dram_energy.py).
Computing it after the run keeps both engines agreeing by construction and needs no new simulation to
price the same run with other numbers (`scaled`).  The leaves are the statistics named `energy.*_j`;
they sum to `energy_j`.
"""

from __future__ import annotations

import dataclasses

from ..machine import CacheConfig, Energy, Machine
from . import dram_energy
from .dram_energy import PJ
from .queue import TOKEN_BYTES
from .stats import Stats

SCALAR_FP = ("fadd", "fsub", "fmul", "ffma", "fmax", "fmin", "fcvt")  # one fp-pipe use, one lane each
MIB = 1 << 20
DRAM_PARTS = {"activate": "activates (each with its precharge)", "read": "line reads", "write": "line writes",
              "io": "the interface: every line's bits over the pins", "background": "standby with rows open",
              "refresh": "refreshes"}


def cache_access_pj(e: Energy, level: CacheConfig) -> float:
    """One lookup or line fill of `level`: the 8 KiB figure grown by the level's size."""
    return e.cache_pj_8kib * (level.size_bytes / 8192) ** e.cache_size_exponent


def _core_pj(st: Stats, m: Machine) -> float:
    """The out-of-order core: every uop's overhead plus each pipe group's datapath."""
    e = m.energy
    lanes = m.execute.simd_bits // 32

    def n(name: str) -> float:
        return st[name] if name in st else 0.0

    scalar_fp = sum(n(f"execute.op.{op}") for op in SCALAR_FP)
    vector_pieces = n("execute.pipe.fp") - scalar_fp
    scalar_div = n("execute.op.fdiv")
    return (n("execute.uops") * e.uop_pj
            + (n("execute.pipe.int_alu") + n("execute.pipe.branch")) * e.int_op_pj
            + n("execute.pipe.int_mul") * e.int_mul_pj + n("execute.pipe.int_div") * e.int_div_pj
            + (scalar_fp + vector_pieces * lanes) * e.fp_lane_pj
            + (scalar_div + n("execute.pipe.vfp_div") * lanes) * e.fp_div_lane_pj
            + n("execute.pipe.shuffle") * e.shuffle_pj)


def dynamic_j(st: Stats, m: Machine) -> dict[str, tuple[float, str]]:
    """Each block's dynamic energy in joules, with what it counts."""
    e = m.energy
    out = {
        "core": (_core_pj(st, m), "uops (execute.uops x uop_pj) and each pipe group's datapath"),
        "access": (st["access.elements"] * e.access_element_pj, "access-unit stream elements"),
        "queue": ((st["operand_bytes"] + TOKEN_BYTES * st["tokens"]) * e.queue_byte_pj,
                  "bytes through the output queue (operands, and 8 a token)"),
    }
    for level in m.caches:
        p = f"cache.{level.name}."
        accesses = st[p + "hits"] + st[p + "misses"] + st[p + "bytes"] / level.line_bytes
        out[level.name] = (accesses * cache_access_pj(e, level), f"{level.name} lookups and line fills")
    device = m.dram.device_spec
    if device is None:
        out["dram"] = (st["dram_bytes"] * e.dram_byte_pj, "bytes to and from ideal DRAM")
    else:
        parts = dram_energy.dynamic_parts(st, device, e.dram_device_scale)
        out["dram"] = (sum(parts.values()) / PJ, f"{device.name} activates, line reads and writes, and interface")
    out["host"] = (st["host.flops"] * e.host_flop_pj, "float operations of host ops")
    return {k: (pj * 1e-12, doc) for k, (pj, doc) in out.items()}


def static_w(m: Machine, cores: int) -> dict[str, tuple[float, str]]:
    """Each block's static power in watts, for `cores` cores: private levels are per core, the last
    level and DRAM are shared."""
    e = m.energy
    private = sum(c.size_bytes for c in m.caches[:-1]) * cores
    mib = (private + m.caches[-1].size_bytes) / MIB
    return {"core": (e.core_static_w * cores, f"{cores} core(s)"),
            "access": (e.access_static_w * cores, f"{cores} access unit(s)"),
            "cache": (e.cache_static_w_per_mib * mib, f"{mib:g} MiB of cache"),
            "dram": (_dram_static_w(m), f"{m.dram.channels} DRAM channel(s)")}


def _dram_static_w(m: Machine) -> float:
    """Every DRAM channel's background power: ideal DRAM's figure, or a device's standby and refresh."""
    device = m.dram.device_spec
    if device is None:
        return m.energy.dram_channel_static_w * m.dram.channels
    return sum(dram_energy.static_parts(device, m.dram.channels, m.energy.dram_device_scale).values())


def report_energy(st: Stats, m: Machine, cores: int = 1) -> None:
    """Add `energy.<block>_j`, `energy.static.<block>_j`, `energy_j` and `power_w` to `st`, which holds
    a run's counters and `sim_seconds`; static power is counted for `cores` cores, idle ones included."""
    seconds = st["sim_seconds"]
    total = 0.0
    for name, (joules, doc) in dynamic_j(st, m).items():
        st.set(f"energy.{name}_j", joules, f"dynamic energy: {doc}", "Joule")
        total += joules
    for name, (watts, doc) in static_w(m, cores).items():
        st.set(f"energy.static.{name}_j", watts * seconds, f"static energy of {doc} over the run", "Joule")
        total += watts * seconds
    st.set("energy_j", total, "energy of the run: the sum of the energy.*_j statistics", "Joule")
    device = m.dram.device_spec
    if device is not None:  # what energy.dram_j and energy.static.dram_j are made of
        k = m.energy.dram_device_scale
        parts = {**dram_energy.dynamic_parts(st, device, k),
                 **{n: w * seconds for n, w in dram_energy.static_parts(device, m.dram.channels, k).items()}}
        for name, joules in parts.items():
            st.set(f"dram.energy.{name}_j", joules, f"DRAM energy of {DRAM_PARTS[name]}", "Joule")
    st.set("power_w", total / seconds if seconds else 0.0, "average power: energy_j / sim_seconds", "Watt")


def scaled(m: Machine, factor: float) -> Machine:
    """`m` with every energy number times `factor`: the sensitivity of a result to the energy model."""
    e = dataclasses.replace(m.energy, **{f.name: getattr(m.energy, f.name) * factor
                                        for f in dataclasses.fields(Energy) if f.name != "cache_size_exponent"})
    return dataclasses.replace(m, energy=e)


def peak_power_w(m: Machine) -> float:
    """Power of the whole machine with every core issuing `issue_width` uops a cycle, its access unit
    issuing a stream element a lane a cycle, and DRAM at its full bandwidth: the figure an iso-power
    comparison holds to a budget (uop overhead only; datapaths and caches add a few percent)."""
    e, hz = m.energy, m.clock_ghz * 1e9
    per_core = (m.execute.issue_width * e.uop_pj + m.access.lanes * e.access_element_pj) * 1e-12 * hz
    device = m.dram.device_spec
    if device is None:
        line_pj = e.dram_byte_pj * m.line_bytes
    else:  # a read of every line and a row opened for each: the dearest way to use the bandwidth
        c = dram_energy.command_energy(device, e.dram_device_scale)
        line_pj = (max(c.read_j, c.write_j) + c.io_j + c.activate_j) / PJ
    dram = m.dram_bytes_per_cycle / m.line_bytes * line_pj * 1e-12 * hz
    return per_core * m.cores + dram + sum(w for w, _ in static_w(m, m.cores).values())
