"""Machine descriptions: what the simulator and the code generator are allowed to assume.

A machine is a tree of frozen dataclasses read from a TOML file.  Presets ship in
`ember/machines/*.toml`; a preset may start with `base = "other"` to inherit another preset and
override only what differs (tables merge key by key, the `caches` array is replaced whole).  Every
number is documented in the TOML file (where it comes from, or that it is an assumption), and every
field carries a one-line description here so reports can print exactly which machine was used.

Keys are dotted paths: `clock_ghz`, `access.lanes`, `execute.fp_mul`, `caches.l2.size_bytes`,
`dram.bytes_per_cycle`.  `Machine.set` overrides one of them from command-line text, checking its
type and the machine's consistency, so a bad `--set` is one clear error and never a wrong run.
All latencies and costs are in core clock cycles (floats are allowed: the timing model is in float
cycles).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import tomllib
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .files import read_text
from .ir.diagnostics import EmberError, Loc

_PRESET_DIR = ("machines",)
_SECTIONS = ("access", "execute", "caches", "dram", "energy")
ADDRESS_MAPS = ("row-bank-rank-column", "mop4-xor")  # ember.sim.dram's module docstring defines each
MAX_DRAM_CHANNELS = 1024  # each channel keeps its own bookings (the fast engine reserves room for each)
# Ranges far beyond any machine built, which keep the engines' state in memory and their arithmetic exact: a count
# sizes arrays both engines allocate, a time is added to cycle counts that must stay below 2^53.
MAX_COUNT = 1 << 20  # reorder-buffer entries, fill buffers, lanes, registers, ...
MAX_CYCLES_PER = 1e6  # a latency, a penalty, a DRAM timing, in cycles
MAX_HOLD = 1024  # cycles one instruction may hold its pipe group
MAX_PER_CYCLE = 64  # instructions of one group a cycle
MAX_QUEUE_BYTES = 1 << 22  # the whole output queue
MAX_CACHE_BYTES = 1 << 30
MAX_CORES = 4096


def _doc(text: str) -> dict[str, str]:
    """Field metadata: the description `describe()` prints next to the value."""
    return {"doc": text}


@dataclass(frozen=True)
class AccessUnit:
    """The access unit: traversal units and streams that run ahead and fill the output queue."""

    lanes: int = field(metadata=_doc("parallel lanes: stream elements issued per cycle, and the queue's width"))
    outstanding: int = field(metadata=_doc("memory requests the access unit may have in flight"))
    queue_bytes: int = field(metadata=_doc("output queue bytes per lane (total = lanes * queue_bytes)"))
    traversal_units: int = field(metadata=_doc("traversal units (loop levels) per access program"))
    stream_slots: int = field(metadata=_doc("stream slots (memory + ALU streams) per access program"))
    cache_level: str = field(metadata=_doc("cache level the access unit's loads enter and its output queue lives in"))

    @property
    def queue_total_bytes(self) -> int:
        """Whole output queue: the back-pressure bound the execute unit sees."""
        return self.lanes * self.queue_bytes


@dataclass(frozen=True)
class ExecuteUnit:
    """The execute unit: an out-of-order core (pipeline.py): in-order dispatch into a reorder buffer,
    issue when the sources are ready and a pipe is free, in-order retirement, a store buffer."""

    simd_bits: int = field(metadata=_doc("vector register width in bits"))
    issue_width: int = field(metadata=_doc("instructions dispatched (renamed) per cycle, in program order"))
    rob_entries: int = field(metadata=_doc("reorder-buffer entries: instructions from dispatch to retirement"))
    store_buffer: int = field(metadata=_doc("store-buffer entries: stores in flight from dispatch until written to L1"))
    miss_slots: int = field(metadata=_doc("L1 miss slots (fill buffers): lines the core may have in flight"))
    prefetch_lines: int = field(metadata=_doc("lines after a core miss the next-line prefetcher fetches (0: none)"))
    mispredict_penalty: float = field(metadata=_doc(
        "cycles the front end loses after a mispredicted branch or callback dispatch, from its resolution"))
    int_alu_latency: float = field(metadata=_doc("latency of integer add/sub/compare/select/move"))
    int_mul_latency: float = field(metadata=_doc("latency of an integer multiply"))
    int_div_latency: float = field(metadata=_doc("latency of an integer divide/remainder"))
    fp_alu_latency: float = field(metadata=_doc("latency of a float or vector add/sub/min/max/convert"))
    fp_mul_latency: float = field(metadata=_doc("latency of a float or vector multiply or fused multiply-add"))
    fp_div_latency: float = field(metadata=_doc("latency of a scalar float divide"))
    vfp_div_latency: float = field(metadata=_doc("latency of a vector float divide"))
    vec_alu_latency: float = field(metadata=_doc("latency of a vector broadcast or compare (vsplat, vmask, viota)"))
    branch_latency: float = field(metadata=_doc("latency of a branch or jump"))
    gather_latency: float = field(metadata=_doc("cycles a vgather adds after its slowest lane's load"))
    int_alu_throughput: float = field(metadata=_doc("cycles per integer ALU op per pipe group (0.25: four a cycle)"))
    int_mul_throughput: float = field(metadata=_doc("cycles per integer multiply"))
    int_div_throughput: float = field(metadata=_doc("cycles per integer divide (the divider is not pipelined)"))
    fp_throughput: float = field(metadata=_doc("cycles per float/vector add or multiply"))
    shuffle_throughput: float = field(metadata=_doc("cycles per vector broadcast or compare into a mask"))
    fp_div_throughput: float = field(metadata=_doc("cycles per scalar float divide"))
    vfp_div_throughput: float = field(metadata=_doc("cycles per vector float divide"))
    branch_throughput: float = field(metadata=_doc("cycles per branch or jump"))
    load_throughput: float = field(metadata=_doc("cycles per load, pop or gather lane (0.5: two a cycle)"))
    store_throughput: float = field(metadata=_doc("cycles per store or scatter lane"))
    host_flops_per_cycle: float = field(metadata=_doc("float operations per cycle for host ops"))
    matrix_flops_per_cycle: float = field(metadata=_doc("float operations per cycle of a host Gemm or MatMul "
                                                        "(a matrix unit's rate, or the SIMD rate without one)"))
    branch_entries: int = field(default=4096, metadata=_doc(
        "2-bit counters of the conditional branches' gshare predictor (a power of two)"))
    branch_history: int = field(default=12, metadata=_doc(
        "outcomes of earlier conditional branches the gshare predictor hashes in (0 to 30)"))

    general_registers: int = field(default=15, metadata=_doc(
        "integer registers a program may keep values in (r registers; backend/registers.py)"))
    vector_registers: int = field(default=32, metadata=_doc(
        "vector registers of simd_bits each (f registers and vectors; a wider vector holds several)"))
    mask_registers: int = field(default=7, metadata=_doc(
        "mask registers of 64 lane bits that can predicate (boolean vectors)"))

    LATENCIES: typing.ClassVar[tuple[str, ...]] = (
        "int_alu_latency", "int_mul_latency", "int_div_latency", "fp_alu_latency", "fp_mul_latency",
        "fp_div_latency", "vfp_div_latency", "vec_alu_latency", "branch_latency", "gather_latency",
        "mispredict_penalty",
    )
    GROUPS: typing.ClassVar[tuple[str, ...]] = (
        "int_alu", "int_mul", "int_div", "fp", "shuffle", "fp_div", "vfp_div", "branch", "load", "store",
    )

    def throughput(self, group: str) -> float:
        """Reciprocal throughput of a pipe group (one of GROUPS), in cycles per instruction."""
        if group not in self.GROUPS:
            raise EmberError(f"unknown pipe group '{group}' (valid: {', '.join(self.GROUPS)})")
        return float(getattr(self, f"{group}_throughput"))

    def pipes(self, group: str) -> tuple[int, int]:
        """(instructions a cycle, cycles each occupies) of a group: 0.5 -> (2, 1); 8 -> (1, 8)."""
        rt = self.throughput(group)
        return (round(1 / rt), 1) if rt < 1 else (1, round(rt))

    def vector_lanes(self, elem_bytes: int) -> int:
        """Elements of `elem_bytes` bytes in one vector register."""
        return max(1, self.simd_bits // (8 * elem_bytes))


@dataclass(frozen=True)
class CacheConfig:
    """One cache level: set-associative, LRU, write-allocate."""

    name: str = field(metadata=_doc("level name (the key under caches.)"))
    size_bytes: int = field(metadata=_doc("capacity in bytes"))
    ways: int = field(metadata=_doc("associativity"))
    line_bytes: int = field(metadata=_doc("line size in bytes (the same at every level)"))
    latency: float = field(metadata=_doc("cycles this level adds to an access that reaches it"))

    @property
    def sets(self) -> int:
        """Number of sets; validation guarantees it is a whole number."""
        return self.size_bytes // (self.ways * self.line_bytes)


@dataclass(frozen=True)
class DramDevice:
    """One channel's DRAM devices as a JEDEC standard defines them (ember/machines/dram/*.toml): the
    organization and every timing the bank model (ember.sim.dram) obeys, in the device's clock (tCK)."""

    name: str = field(metadata=_doc("the device preset's name"))
    description: str = field(metadata=_doc("one-line summary: standard, speed grade, organization"))
    tck_ps: float = field(metadata=_doc("device clock period in picoseconds (timings below are in these clocks)"))
    burst_bytes: int = field(metadata=_doc("bytes one burst moves over the channel (one cache line)"))
    ranks: int = field(metadata=_doc("ranks on the channel"))
    bankgroups: int = field(metadata=_doc("bank groups per rank"))
    banks: int = field(metadata=_doc("banks per bank group"))
    row_bytes: int = field(metadata=_doc("bytes of one row across the channel's width (the page a rank opens)"))
    nburst: float = field(metadata=_doc("clocks one burst holds the data bus (BL/2)"))
    ncl: float = field(metadata=_doc("read command to its data (CAS latency)"))
    ncwl: float = field(metadata=_doc("write command to its data"))
    nrcd: float = field(metadata=_doc("activate to a column command of the row"))
    nrp: float = field(metadata=_doc("precharge to the next activate of the bank"))
    nras: float = field(metadata=_doc("activate to precharge of the bank, at least"))
    nrc: float = field(metadata=_doc("activate to the next activate of the bank, at least"))
    nwr: float = field(metadata=_doc("end of write data to precharge (write recovery)"))
    nrtp: float = field(metadata=_doc("read command to precharge"))
    nccd_s: float = field(metadata=_doc("column command to column command, different bank groups"))
    nccd_l: float = field(metadata=_doc("column command to column command, same bank group"))
    nrrd_s: float = field(metadata=_doc("activate to activate, different bank groups of a rank"))
    nrrd_l: float = field(metadata=_doc("activate to activate, same bank group"))
    nfaw: float = field(metadata=_doc("window holding at most four activates of a rank"))
    nrefi: float = field(metadata=_doc("refresh interval (all-bank refresh)"))
    nrfc: float = field(metadata=_doc("refresh cycle time: the rank is busy this long per refresh"))
    nbl: float = field(metadata=_doc("clocks of one burst on the data bus (a line may take several: nburst)"))
    nrtw: float = field(metadata=_doc("read command to write command of a rank"))
    nwtr_s: float = field(metadata=_doc("end of write data to a read command, different bank groups"))
    vdd: float = field(metadata=_doc("core supply voltage in volts, which the currents below are drawn at"))
    devices: float = field(metadata=_doc("devices of a rank, each drawing the currents below (a fraction where the "
                                         "currents are for a wider part than the channel)"))
    idd0: float = field(metadata=_doc("mA, one bank cycling activate to precharge every tRC"))
    idd2n: float = field(metadata=_doc("mA, standby with every bank precharged"))
    idd3n: float = field(metadata=_doc("mA, standby with banks open"))
    idd4r: float = field(metadata=_doc("mA, reads back to back"))
    idd4w: float = field(metadata=_doc("mA, writes back to back"))
    idd5b: float = field(metadata=_doc("mA, all-bank refreshes back to back (one every tRFC)"))
    io_bit_pj: float = field(metadata=_doc("interface energy of a bit moved: drivers, termination and wires, which "
                                           "the currents leave out"))


@dataclass(frozen=True)
class Dram:
    """Main memory behind the last cache level (ember.sim.dram): ideal channels, or banked devices."""

    latency: float = field(metadata=_doc(
        "cycles a request spends outside the DRAM devices (controller, interconnect), besides their own timing"))
    bytes_per_cycle: float = field(default=0.0, metadata=_doc(
        "ideal DRAM's bandwidth in bytes per cycle, shared by all cores; a device's peak is derived from it"))
    channels: int = field(default=1, metadata=_doc(
        "independent channels; line n is served by channel n mod channels"))
    device: str = field(default="ideal", metadata=_doc(
        "'ideal' (a bus per channel, no banks or rows) or a device preset in ember/machines/dram/"))
    write_batch: float = field(default=19.2, metadata=_doc(
        "lines the controller writes in one batch before it turns the bus back to reads"))
    address_map: str = field(default="mop4-xor", metadata=_doc(
        "how a line's address picks its rank, bank group, bank and row (ember.sim.dram): 'mop4-xor' or "
        "'row-bank-rank-column'"))

    @property
    def device_spec(self) -> DramDevice | None:
        """The device preset `device` names, None for ideal DRAM."""
        return None if self.device == "ideal" else load_dram_device(self.device)

    def idle_cycles(self, clock_ghz: float) -> float:
        """Cycles from a request reaching DRAM to its data on the bus when nothing else is queued and its bank
        is closed: `latency`, and a device's tRCD + tCL."""
        d = self.device_spec
        return self.latency + (0.0 if d is None else (d.nrcd + d.ncl) * d.tck_ps / 1000.0 * clock_ghz)

    def peak_bytes_per_cycle(self, clock_ghz: float) -> float:
        """Peak bandwidth in bytes per core cycle: ideal DRAM's setting, or every channel's bursts back to back
        (before refresh, rows and banks take their share)."""
        d = self.device_spec
        if d is None:
            return self.bytes_per_cycle
        return self.channels * d.burst_bytes / (max(d.nburst, d.nccd_s) * d.tck_ps / 1000.0 * clock_ghz)


@dataclass(frozen=True)
class Energy:
    """Energy of each counted event and static power of each block (sim/energy.py turns a run's counters
    into joules).  Every figure is at the machine's own process node; the preset files say how each was
    derived (most from published 45 nm tables, scaled)."""

    uop_pj: float = field(metadata=_doc("one uop through the out-of-order core: fetch, decode, rename, "
                                        "schedule, register file, retire"))
    int_op_pj: float = field(metadata=_doc("one integer ALU op or branch on its pipe"))
    int_mul_pj: float = field(metadata=_doc("one integer multiply on its pipe"))
    int_div_pj: float = field(metadata=_doc("one integer divide or remainder on its pipe"))
    fp_lane_pj: float = field(metadata=_doc("one 32-bit float add, multiply, min, max or convert lane: a scalar "
                                            "op is one lane, a vector piece simd_bits/32"))
    fp_div_lane_pj: float = field(metadata=_doc("one 32-bit float divide lane"))
    shuffle_pj: float = field(metadata=_doc("one vector broadcast or compare into a mask"))
    cache_pj_8kib: float = field(metadata=_doc("one access (a lookup or a line fill) to an 8 KiB cache; "
                                               "a level of S bytes costs (S / 8 KiB)^cache_size_exponent times "
                                               "this"))
    cache_size_exponent: float = field(metadata=_doc("how a cache access's energy grows with the level's size"))
    access_element_pj: float = field(metadata=_doc("one access-unit stream element: its address arithmetic and "
                                                   "request"))
    queue_byte_pj: float = field(metadata=_doc("one byte pushed into the output queue and popped from it"))
    host_flop_pj: float = field(metadata=_doc("one float operation of a host op such as a dense layer"))
    dram_byte_pj: float = field(metadata=_doc("one byte moved to or from ideal DRAM, device and interface (a DRAM "
                                              "device preset prices its own commands instead)"))
    core_static_w: float = field(metadata=_doc("leakage and clock power of one core, in watts"))
    access_static_w: float = field(metadata=_doc("leakage and clock power of one access unit, in watts"))
    cache_static_w_per_mib: float = field(metadata=_doc("leakage power of a MiB of cache, in watts"))
    dram_channel_static_w: float = field(metadata=_doc("background power of one ideal DRAM channel (refresh, "
                                                       "interface), in watts (a device preset has its own)"))
    dram_device_scale: float = field(default=1.0, metadata=_doc(
        "multiplies every energy a DRAM device preset gives (its commands, interface, standby and refresh)"))


@dataclass(frozen=True)
class Machine:
    """A whole machine; frozen so a run's machine cannot drift, `set` returns a new one."""

    name: str = field(metadata=_doc("machine preset name"))
    description: str = field(metadata=_doc("one-line summary of the preset"))
    clock_ghz: float = field(metadata=_doc("core clock in GHz (converts cycles to seconds)"))
    cores: int = field(metadata=_doc("cores, each with its own access unit; the batch is split across them"))
    access: AccessUnit
    execute: ExecuteUnit
    caches: tuple[CacheConfig, ...]
    dram: Dram
    energy: Energy

    def __post_init__(self) -> None:
        _validate(self)

    # --- queries -------------------------------------------------------------------------

    def cache(self, name: str) -> CacheConfig:
        """The cache level called `name`."""
        for level in self.caches:
            if level.name == name:
                return level
        raise EmberError(f"unknown cache level '{name}' (levels: {', '.join(self.cache_names)})")

    @property
    def cache_names(self) -> tuple[str, ...]:
        """Level names from the core outward."""
        return tuple(c.name for c in self.caches)

    @property
    def line_bytes(self) -> int:
        """The line size (validation makes it the same at every level)."""
        return self.caches[0].line_bytes

    @property
    def dram_bytes_per_cycle(self) -> float:
        """Peak DRAM bandwidth in bytes per core cycle (Dram.peak_bytes_per_cycle)."""
        return self.dram.peak_bytes_per_cycle(self.clock_ghz)

    def seconds(self, cycles: float) -> float:
        """Wall time of `cycles` at this clock."""
        return cycles / (self.clock_ghz * 1e9)

    def keys(self) -> list[str]:
        """Every settable dotted key, in file order."""
        return [k for k, _, _ in self.describe()]

    # --- overrides -----------------------------------------------------------------------

    def set(self, key: str, value: str) -> Machine:
        """A copy with one dotted key set from text (`--set key=value`), type-checked and validated."""
        parts = key.split(".")
        head = parts[0]
        sections = {"access": self.access, "execute": self.execute, "dram": self.dram, "energy": self.energy}
        valid_top = _top_keys() + ["access.*", "execute.*", "caches.line_bytes", "caches.LEVEL.*", "dram.*",
                                   "energy.*"]
        if len(parts) == 1 and head not in sections and head != "caches":
            f = _field(Machine, key, "", valid_top)
            return dataclasses.replace(self, **{key: _convert(key, f, Machine, value)})
        if key == "caches.line_bytes":
            f = _field(CacheConfig, "line_bytes", "caches", ["caches.line_bytes"])
            line = _convert(key, f, CacheConfig, value)
            return dataclasses.replace(self, caches=tuple(dataclasses.replace(c, line_bytes=line)
                                                          for c in self.caches))
        if head in sections and len(parts) == 2:
            section = sections[head]
            f = _field(type(section), parts[1], head, _section_keys(head, type(section)))
            changes = {parts[1]: _convert(key, f, type(section), value)}
            if key == "dram.device":  # a device brings its own bandwidth; ideal DRAM keeps the device's peak
                changes["bytes_per_cycle"] = self.dram_bytes_per_cycle if value == "ideal" else 0.0
            new = dataclasses.replace(section, **changes)
            return dataclasses.replace(self, **{head: new})
        if head == "caches" and len(parts) == 3:
            names = self.cache_names
            if parts[1] not in names:
                raise EmberError(f"unknown cache level '{parts[1]}' in machine key '{key}' "
                                 f"(levels: {', '.join(names)})")
            valid = [f"caches.{parts[1]}.{f.name}" for f in dataclasses.fields(CacheConfig)
                     if f.name != "name"]
            if parts[2] == "name":
                raise EmberError(f"machine key '{key}' cannot be set (valid keys: {', '.join(valid)})")
            f = _field(CacheConfig, parts[2], f"caches.{parts[1]}", valid)
            level = self.cache(parts[1])
            new_level = dataclasses.replace(level, **{parts[2]: _convert(key, f, CacheConfig, value)})
            caches = tuple(new_level if c.name == parts[1] else c for c in self.caches)
            return dataclasses.replace(self, caches=caches)
        if head in sections or head == "caches":
            shape = "caches.LEVEL.FIELD" if head == "caches" else f"{head}.FIELD"
            raise EmberError(f"bad machine key '{key}' (expected {shape})")
        raise EmberError(f"unknown machine key '{key}' (valid keys: {', '.join(valid_top)})")

    def with_overrides(self, items: Iterable[str]) -> Machine:
        """Apply `key=value` strings in order, as given to repeated `--set` options."""
        m = self
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise EmberError(f"bad --set '{item}' (expected key=value, e.g. dram.channels=2)")
            m = m.set(key.strip(), value.strip())
        return m

    # --- reporting -----------------------------------------------------------------------

    def describe(self) -> list[tuple[str, str, str]]:
        """(key, value, description) for every field, in file order, for reports and stats headers."""
        rows: list[tuple[str, str, str]] = []
        for f in dataclasses.fields(Machine):
            if f.name in _SECTIONS:
                continue
            rows.append((f.name, _fmt(getattr(self, f.name)), f.metadata["doc"]))
        for head in ("access", "execute"):
            rows.extend(_rows(head, getattr(self, head)))
        for level in self.caches:
            rows.extend(r for r in _rows(f"caches.{level.name}", level) if not r[0].endswith(".name"))
        rows.extend(_rows("dram", self.dram))
        rows.extend(_rows("energy", self.energy))
        return rows


# --- loading -------------------------------------------------------------------------------


def presets() -> list[str]:
    """Names of the shipped presets."""
    folder = resources.files("ember").joinpath(*_PRESET_DIR)
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_machine(name_or_path: str) -> Machine:
    """A preset by name (`default`, `small`) or a machine TOML file by path."""
    looks_like_path = name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path
    if looks_like_path:
        path = Path(name_or_path)
        try:
            text = read_text(name_or_path)  # bounded: a FIFO or a device may never end
        except EmberError as e:
            raise EmberError(f"machine file: {e.message}", str(path)) from None
        return _from_text(text, str(path), path.stem, str(path))
    return _from_text(_preset_text(name_or_path, []), f"{name_or_path}.toml", name_or_path, name_or_path)


def _preset_text(name: str, chain: list[str]) -> str:
    names = presets()
    if name not in names:
        via = f" (inherited by {chain[-1]})" if chain else ""
        raise EmberError(f"unknown machine preset '{name}'{via} (presets: {', '.join(names)})")
    return resources.files("ember").joinpath(*_PRESET_DIR, f"{name}.toml").read_text(encoding="utf-8")


@functools.cache
def load_dram_device(name: str) -> DramDevice:
    """A DRAM device preset (ember/machines/dram/NAME.toml) by name."""
    folder = resources.files("ember").joinpath(*_PRESET_DIR, "dram")
    names = sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))
    if name not in names:
        raise EmberError(f"unknown DRAM device '{name}' (devices: ideal, {', '.join(names)})")
    text = folder.joinpath(f"{name}.toml").read_text(encoding="utf-8")
    data = _parse_toml(text, f"dram/{name}.toml")
    return _build_section(f"dram device '{name}'", DramDevice, {"name": name, **data})


def _parse_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            lines = text.splitlines()
            src = lines[line - 1] if 0 < line <= len(lines) else None
            raise EmberError(msg[: m.start()].strip(), Loc(where, line, col), src) from None
        raise EmberError(msg, where) from None


def _resolve(data: dict[str, Any], where: str, chain: list[str]) -> dict[str, Any]:
    """Merge a file's table over its `base` preset's, recursively; `caches` replaces whole."""
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise EmberError("'base' must be a preset name (a string)", where)
    if base in chain:
        raise EmberError(f"machine presets inherit in a cycle: {' -> '.join([*chain, base])}", where)
    parent = _resolve(_parse_toml(_preset_text(base, chain), f"{base}.toml"), f"{base}.toml", [*chain, base])
    return _merge(parent, data)


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(parent)
    for k, v in child.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _from_text(text: str, where: str, stem: str, ident: str) -> Machine:
    """Build from one file's text; `ident` (preset name or path) seeds the inheritance-cycle check."""
    data = _parse_toml(text, where)
    own_name = data.get("name")
    own_description = data.get("description")
    data = _resolve(data, where, [ident])
    data["name"] = own_name if own_name is not None else stem
    data["description"] = own_description if own_description is not None else ""
    try:
        return _build_machine(data)
    except EmberError as e:
        if e.where is None:
            raise EmberError(e.message, where) from None
        raise


def _build_machine(data: dict[str, Any]) -> Machine:
    sections = _SECTIONS
    top = _top_keys()
    valid = top + list(sections)
    for k in data:
        if k not in valid:
            raise EmberError(f"unknown machine key '{k}' (valid keys: {', '.join(valid)})")
    for k in [*top, *sections]:
        if k not in data:
            raise EmberError(f"machine is missing '{k}'")
    kwargs: dict[str, Any] = {k: _from_toml(k, _field(Machine, k, "", top), Machine, data[k]) for k in top}
    kwargs["access"] = _build_section("access", AccessUnit, data["access"])
    kwargs["execute"] = _build_section("execute", ExecuteUnit, data["execute"])
    kwargs["dram"] = _build_section("dram", Dram, data["dram"])
    kwargs["energy"] = _build_section("energy", Energy, data["energy"])
    caches = data["caches"]
    if not isinstance(caches, list) or not all(isinstance(c, dict) for c in caches):
        raise EmberError("'caches' must be an array of tables ([[caches]])")
    levels = []
    for i, c in enumerate(caches):
        label = f"caches.{c['name']}" if isinstance(c.get("name"), str) else f"caches[{i}]"
        levels.append(_build_section(label, CacheConfig, c))
    kwargs["caches"] = tuple(levels)
    return Machine(**kwargs)


def _build_section(prefix: str, cls: type, table: Any) -> Any:
    if not isinstance(table, dict):
        raise EmberError(f"'{prefix}' must be a table")
    valid = [f.name for f in dataclasses.fields(cls)]
    for k in table:
        if k not in valid:
            raise EmberError(f"unknown machine key '{prefix}.{k}' (valid keys: "
                             f"{', '.join(f'{prefix}.{v}' for v in valid)})")
    fields = dataclasses.fields(cls)
    missing = [f.name for f in fields if f.name not in table and f.default is dataclasses.MISSING]
    if missing:
        raise EmberError(f"machine section '{prefix}' is missing {', '.join(missing)}")
    return cls(**{f.name: _from_toml(f"{prefix}.{f.name}", f, cls, table[f.name]) for f in fields
                  if f.name in table})


# --- typing helpers ------------------------------------------------------------------------


def _top_keys() -> list[str]:
    return [f.name for f in dataclasses.fields(Machine) if f.name not in _SECTIONS]


def _section_keys(prefix: str, cls: type) -> list[str]:
    return [f"{prefix}.{f.name}" for f in dataclasses.fields(cls)]


def _field(cls: type, name: str, prefix: str, valid: list[str]) -> dataclasses.Field[Any]:
    for f in dataclasses.fields(cls):
        if f.name == name and f.name not in _SECTIONS:
            return f
    key = f"{prefix}.{name}" if prefix else name
    where = f" in section '{prefix}'" if prefix else ""
    raise EmberError(f"unknown machine key '{key}'{where} (valid keys: {', '.join(valid)})")


def _type_of(cls: type, f: dataclasses.Field[Any]) -> type:
    return typing.get_type_hints(cls)[f.name]


def _from_toml(key: str, f: dataclasses.Field[Any], cls: type, value: Any) -> Any:
    """A TOML value checked against the field's type (ints are accepted for float fields)."""
    want = _type_of(cls, f)
    if want is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if want is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if want is str and isinstance(value, str):
        return value
    if want is bool and isinstance(value, bool):
        return value
    raise EmberError(f"machine key '{key}' expects {_type_name(want)}, got {value!r}")


def _convert(key: str, f: dataclasses.Field[Any], cls: type, text: str) -> Any:
    """Command-line text converted to the field's type, or an error naming the key."""
    want = _type_of(cls, f)
    if want is str:
        return text
    if want is bool:
        if text.lower() not in ("true", "false"):
            raise EmberError(f"machine key '{key}' expects true or false, got '{text}'")
        return text.lower() == "true"
    try:
        if want is int:
            try:
                return int(text, 0)
            except ValueError:
                return int(text)
        return float(text)
    except ValueError:
        raise EmberError(f"machine key '{key}' expects {_type_name(want)}, got '{text}'") from None


def _type_name(t: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(t, t.__name__)


def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _rows(prefix: str, obj: Any) -> list[tuple[str, str, str]]:
    return [(f"{prefix}.{f.name}", _fmt(getattr(obj, f.name)), f.metadata["doc"])
            for f in dataclasses.fields(obj)]


# --- validation ----------------------------------------------------------------------------


def _validate(m: Machine) -> None:
    """Reject machines the timing model cannot give a meaning to, naming the offending key."""

    def need(ok: bool, key: str, value: Any, why: str) -> None:
        if not ok:
            raise EmberError(f"machine key '{key}' = {_fmt(value)}: {why}")

    def positive(key: str, value: float) -> None:
        need(math.isfinite(value) and value > 0, key, value, "must be positive")

    def non_negative(key: str, value: float) -> None:
        need(math.isfinite(value) and value >= 0, key, value, "must be a finite number >= 0")

    def count(key: str, value: int, top: int = MAX_COUNT) -> None:
        need(1 <= value <= top, key, value, f"must be from 1 to {top:,}")

    def cycles(key: str, value: float, top: float = MAX_CYCLES_PER) -> None:
        need(math.isfinite(value) and 0 <= value <= top, key, value, f"must be from 0 to {top:g} cycles")

    def within(key: str, value: float, lo: float, hi: float) -> None:
        need(math.isfinite(value) and lo <= value <= hi, key, value, f"must be from {lo:g} to {hi:g}")

    within("clock_ghz", m.clock_ghz, 0.001, 100.0)
    count("cores", m.cores, MAX_CORES)
    a = m.access
    for name in ("lanes", "outstanding", "traversal_units", "stream_slots"):
        count(f"access.{name}", getattr(a, name))
    positive("access.queue_bytes", a.queue_bytes)
    if a.queue_total_bytes > MAX_QUEUE_BYTES:
        raise EmberError(f"machine keys 'access.lanes' = {a.lanes} and 'access.queue_bytes' = {a.queue_bytes} make an "
                         f"output queue of {a.queue_total_bytes:,} bytes; the most is {MAX_QUEUE_BYTES:,}")
    e = m.execute
    need(8 <= e.simd_bits <= 8192 and e.simd_bits % 8 == 0, "execute.simd_bits", e.simd_bits,
         "must be a multiple of 8 from 8 to 8192")
    for name in ("issue_width", "rob_entries", "store_buffer", "general_registers", "vector_registers",
                 "mask_registers"):
        count(f"execute.{name}", getattr(e, name))
    count("execute.miss_slots", e.miss_slots, 4096)  # each miss looks for the slot free earliest among them
    need(0 <= e.prefetch_lines <= 64, "execute.prefetch_lines", e.prefetch_lines, "must be from 0 to 64")
    need(0 < e.branch_entries <= 1 << 24 and e.branch_entries & (e.branch_entries - 1) == 0, "execute.branch_entries",
         e.branch_entries, "must be a power of two from 1 to 16777216")
    need(0 <= e.branch_history <= 30, "execute.branch_history", e.branch_history, "must be from 0 to 30")
    for name in ExecuteUnit.LATENCIES:
        cycles(f"execute.{name}", getattr(e, name))
    for group in ExecuteUnit.GROUPS:
        key, rt = f"execute.{group}_throughput", getattr(e, f"{group}_throughput")
        need(math.isfinite(rt) and 1 / MAX_PER_CYCLE <= rt <= MAX_HOLD, key, rt,
             f"must be from 1/{MAX_PER_CYCLE} to {MAX_HOLD} cycles")
        whole = 1 / rt if rt < 1 else rt
        need(abs(whole - round(whole)) < 1e-9, key, rt,
             "must be a whole number of cycles or one over a whole number (0.25, 0.5, 1, 2, ...)")
    within("execute.host_flops_per_cycle", e.host_flops_per_cycle, 1e-6, 1e9)
    within("execute.matrix_flops_per_cycle", e.matrix_flops_per_cycle, 1e-6, 1e9)
    need(len(m.caches) > 0, "caches", "[]", "at least one cache level is needed")
    seen: set[str] = set()
    for c in m.caches:
        p = f"caches.{c.name}"
        need(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", c.name) is not None, f"{p}.name", c.name,
             "must be an identifier")
        need(c.name not in seen, f"{p}.name", c.name, "names a level twice")
        seen.add(c.name)
        count(f"{p}.ways", c.ways, 1024)
        count(f"{p}.line_bytes", c.line_bytes, 4096)
        need(c.line_bytes & (c.line_bytes - 1) == 0, f"{p}.line_bytes", c.line_bytes,
             "must be a power of two")
        need(c.line_bytes == m.caches[0].line_bytes, f"{p}.line_bytes", c.line_bytes,
             f"must equal the first level's line size ({m.caches[0].line_bytes}); "
             "set caches.line_bytes to change every level")
        count(f"{p}.size_bytes", c.size_bytes, MAX_CACHE_BYTES)
        need(c.size_bytes % (c.ways * c.line_bytes) == 0, f"{p}.size_bytes", c.size_bytes,
             f"must be a multiple of ways * line_bytes ({c.ways * c.line_bytes})")
        cycles(f"{p}.latency", c.latency)
    need(a.cache_level in seen, "access.cache_level", a.cache_level,
         f"must name a cache level ({', '.join(m.cache_names)})")
    cycles("dram.latency", m.dram.latency)
    device = m.dram.device_spec
    if device is None:
        within("dram.bytes_per_cycle", m.dram.bytes_per_cycle, 1e-6, 1e6)
    else:
        need(m.dram.bytes_per_cycle == 0, "dram.bytes_per_cycle", m.dram.bytes_per_cycle,
             f"device '{device.name}' sets the bandwidth (use dram.channels, or dram.device=ideal)")
        _validate_device(device, m.line_bytes)
    within("dram.write_batch", m.dram.write_batch, 1, 1e6)
    need(m.dram.address_map in ADDRESS_MAPS, "dram.address_map", m.dram.address_map,
         f"must be one of {', '.join(ADDRESS_MAPS)}")
    need(1 <= m.dram.channels <= MAX_DRAM_CHANNELS, "dram.channels", m.dram.channels,
         f"must be from 1 to {MAX_DRAM_CHANNELS}")
    for f in dataclasses.fields(Energy):
        non_negative(f"energy.{f.name}", getattr(m.energy, f.name))



def _validate_device(d: DramDevice, line_bytes: int) -> None:
    """A device preset the bank model can use with this line size."""
    def need(ok: bool, key: str, why: str) -> None:
        if not ok:
            raise EmberError(f"DRAM device '{d.name}': {key} = {_fmt(getattr(d, key))}: {why}")

    need(d.burst_bytes == line_bytes, "burst_bytes", f"must equal the cache line ({line_bytes} bytes)")
    for key in ("ranks", "bankgroups", "banks"):
        need(0 < getattr(d, key) <= 1024 and getattr(d, key) & (getattr(d, key) - 1) == 0, key,
             "must be a power of two up to 1024 (the mop4-xor map XORs column bits into it)")
    lines = d.row_bytes // line_bytes
    need(d.row_bytes % line_bytes == 0 and 4 <= lines <= 1 << 16 and lines & (lines - 1) == 0, "row_bytes",
         f"must be a power-of-two multiple of four cache lines ({4 * line_bytes} bytes)")
    need(math.isfinite(d.tck_ps) and 0.01 <= d.tck_ps <= 1e6, "tck_ps", "must be from 0.01 to 1e6 picoseconds")
    for f in dataclasses.fields(DramDevice):
        if f.name.startswith("n") and f.name != "name":
            need(math.isfinite(getattr(d, f.name)) and 0 <= getattr(d, f.name) <= 1e7, f.name,
                 "must be from 0 to 1e7 clocks")
    need(d.nburst > 0, "nburst", "must be positive")
    for key in ("vdd", "devices", "idd0", "idd2n", "idd3n", "idd4r", "idd4w", "idd5b", "io_bit_pj"):
        need(math.isfinite(getattr(d, key)) and getattr(d, key) >= 0, key, "must be >= 0")
    for key in ("idd4r", "idd4w", "idd5b"):
        need(getattr(d, key) >= d.idd3n, key, "must be at least idd3n (a command draws more than standby)")
    need(d.idd0 * d.nrc >= d.idd3n * d.nras + d.idd2n * (d.nrc - d.nras), "idd0",
         "must be at least the standby it spans (idd3n for nras, idd2n for the rest of nrc)")
    need(d.nrefi > d.nrfc, "nrefi", "must exceed nrfc (a refresh must end before the next)")
