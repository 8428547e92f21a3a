"""Machine descriptions: presets, inheritance, `--set` overrides and the errors users see."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from ember.ir.diagnostics import EmberError, Loc
from ember.machine import Machine, load_machine, presets


def test_default_follows_the_tmu_design() -> None:
    m = load_machine("default")
    assert (m.access.lanes, m.access.outstanding, m.access.queue_bytes) == (8, 128, 2048)
    assert m.access.queue_total_bytes == 16384
    assert m.execute.simd_bits == 512 and m.execute.vector_lanes(4) == 16
    assert m.cache_names == ("l1", "l2", "llc") and m.access.cache_level == "l2"
    assert m.cache("l1").sets == 64 and m.line_bytes == 64
    assert m.seconds(2e9) == 1.0


def test_presets_and_unknown_preset() -> None:
    assert {"default", "small"} <= set(presets())
    with pytest.raises(EmberError, match=r"unknown machine preset 'huge' \(presets: .*default.*small"):
        load_machine("huge")


def test_small_inherits_default_and_replaces_caches() -> None:
    d, s = load_machine("default"), load_machine("small")
    assert s.name == "small" and s.cache_names == ("l1", "l2")
    assert s.access == d.access and s.execute == d.execute
    assert s.cache("l1").size_bytes == 1024 and s.dram.bytes_per_cycle == 8.0


def test_every_default_value_is_documented() -> None:
    text = resources.files("ember").joinpath("machines", "default.toml").read_text()
    for line in text.splitlines():
        m = re.match(r"(\w+)\s*=", line)
        if m and m.group(1) not in ("name", "description"):
            assert "#" in line, f"undocumented value: {line}"


def test_load_from_path_with_base(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('base = "small"\n[access]\nlanes = 4\n')
    m = load_machine(str(f))
    assert m.name == "mine" and m.access.lanes == 4 and m.cache_names == ("l1", "l2")


def test_file_errors(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('base = "default"\n[access]\nlanez = 4\n')
    with pytest.raises(EmberError, match=r"unknown machine key 'access.lanez'.*access.lanes") as e:
        load_machine(str(f))
    assert e.value.where == str(f)
    f.write_text('base = "default"\n[access]\nlanes = 4.5\n')
    with pytest.raises(EmberError, match="'access.lanes' expects an integer"):
        load_machine(str(f))
    f.write_text('base = "default"\n[dram]\nlatency = true\n')
    with pytest.raises(EmberError, match="'dram.latency' expects a number"):
        load_machine(str(f))
    f.write_text('base = "default"\n[access]\nlanes = = 4\n')
    with pytest.raises(EmberError) as e:
        load_machine(str(f))
    assert isinstance(e.value.where, Loc) and e.value.where.line == 3
    f.write_text('clock_ghz = 1.0\n')
    with pytest.raises(EmberError, match="missing"):
        load_machine(str(f))
    with pytest.raises(EmberError, match="machine file: cannot read"):
        load_machine(str(tmp_path / "absent.toml"))
    f.write_text('base = "nope"\n')
    with pytest.raises(EmberError, match="unknown machine preset 'nope'"):
        load_machine(str(f))


def test_set_overrides_return_a_new_machine() -> None:
    d = load_machine("default")
    m = d.set("dram.device", "ideal").set("dram.bytes_per_cycle", "16").set("caches.l2.size_bytes", "524288")
    m = m.set("access.lanes", "4")
    assert m.dram.bytes_per_cycle == 16.0 and isinstance(m.dram.bytes_per_cycle, float)
    assert m.cache("l2").size_bytes == 524288 and m.access.lanes == 4
    assert d.access.lanes == 8 and d.cache("l2").size_bytes == 2097152
    assert d.set("clock_ghz", "3").clock_ghz == 3.0
    assert d.set("access.cache_level", "llc").access.cache_level == "llc"
    assert d.set("execute.fp_mul_latency", "2.5").execute.fp_mul_latency == 2.5
    assert all(c.line_bytes == 128 for c in m.set("caches.line_bytes", "128").caches)  # ideal DRAM: any line
    assert d.with_overrides(["access.lanes=2", " dram.latency = 100 "]).dram.latency == 100.0


def test_every_described_key_round_trips_through_set() -> None:
    d = load_machine("default")
    rows = d.describe()
    assert len({k for k, _, _ in rows}) == len(rows)
    assert all(desc for _, _, desc in rows)
    for key, value, _ in rows:
        assert d.set(key, value) == d, key


@pytest.mark.parametrize(
    ("key", "value", "pattern"),
    [
        ("access.lanez", "4", r"unknown machine key 'access.lanez' in section 'access' \(valid keys: access"),
        ("access.lanes", "four", r"'access.lanes' expects an integer, got 'four'"),
        ("access.lanes", "4.5", r"'access.lanes' expects an integer"),
        ("access.lanes", "0", r"'access.lanes' = 0: must be from 1 to 1,048,576"),
        ("dram.bytes_per_cycle", "fast", r"'dram.bytes_per_cycle' expects a number"),
        ("dram.bytes_per_cycle", "inf", r"'dram.bytes_per_cycle' = inf: device 'ddr5-4800' sets the bandwidth"),
        ("dram.device", "ddr9", r"unknown DRAM device 'ddr9' \(devices: ideal, ddr4-3200, ddr5-4800, hbm2, hbm3\)"),
        ("dram.address_map", "diagonal", r"'dram.address_map' = diagonal: must be one of"),
        ("dram.write_batch", "0.5", r"'dram.write_batch' = 0.5: must be from 1 to 1e\+06"),
        ("dram.channels", "0", r"'dram.channels' = 0: must be from 1 to 1024"),
        ("dram.channels", "1025", r"'dram.channels' = 1025: must be from 1 to 1024"),
        ("dram.channels", "2.5", r"'dram.channels' expects an integer, got '2.5'"),
        ("caches.l9.size_bytes", "1", r"unknown cache level 'l9'.*levels: l1, l2, llc"),
        ("caches.l2.sizebytes", "1", r"unknown machine key 'caches.l2.sizebytes'.*caches.l2.size_bytes"),
        ("caches.l2.size_bytes", "1000", r"'caches.l2.size_bytes' = 1000: must be a multiple of ways"),
        ("caches.l2.line_bytes", "128", r"'caches.l2.line_bytes' = 128: must equal.*caches.line_bytes"),
        ("caches.l2.name", "x", r"cannot be set"),
        ("caches.l2", "1", r"expected caches.LEVEL.FIELD"),
        ("access", "1", r"expected access.FIELD"),
        ("gpu.lanes", "1", r"unknown machine key 'gpu.lanes' \(valid keys: .*access"),
        ("clock", "1", r"unknown machine key 'clock' \(valid keys: .*clock_ghz"),
        ("access.cache_level", "l9", r"'access.cache_level' = l9: must name a cache level \(l1, l2, llc\)"),
        ("execute.simd_bits", "100", r"multiple of 8"),
        ("execute.int_div_latency", "-1", r"'execute.int_div_latency' = -1.0: must be from 0 to 1e\+06 cycles"),
        ("execute.issue_width", "0", r"'execute.issue_width' = 0: must be from 1 to 1,048,576"),
        ("execute.rob_entries", "-3", r"'execute.rob_entries' = -3: must be from 1 to 1,048,576"),
        ("execute.fp_throughput", "0", r"'execute.fp_throughput' = 0.0: must be from 1/64 to 1024 cycles"),
        ("execute.load_throughput", "0.3", r"'execute.load_throughput' = 0.3: must be a whole number of cycles"),
        ("execute.int_div_throughput", "2.5", r"'execute.int_div_throughput' = 2.5: must be a whole number"),
        ("execute.prefetch_lines", "-1", r"'execute.prefetch_lines' = -1: must be from 0 to 64"),
        # absurd settings that once crashed the fast engine, hung one engine or made the engines disagree
        ("execute.rob_entries", "2147483648", r"'execute.rob_entries' = 2147483648: must be from 1 to 1,048,576"),
        ("execute.store_buffer", "4294967296", r"'execute.store_buffer' = 4294967296: must be from 1 to"),
        ("execute.miss_slots", "2147483648", r"'execute.miss_slots' = 2147483648: must be from 1 to 4,096"),
        ("access.outstanding", "3000000000", r"'access.outstanding' = 3000000000: must be from 1 to"),
        ("execute.fp_throughput", "1e8", r"'execute.fp_throughput' = 100000000.0: must be from 1/64 to 1024"),
        ("execute.int_alu_latency", "9.2e18", r"'execute.int_alu_latency' = 9.2e\+18: must be from 0 to 1e\+06"),
        ("execute.prefetch_lines", "9223372036854775807", r"must be from 0 to 64"),
        ("clock_ghz", "1e-300", r"'clock_ghz' = 1e-300: must be from 0.001 to 100"),
        ("clock_ghz", "1e308", r"'clock_ghz' = 1e\+308: must be from 0.001 to 100"),
        ("execute.host_flops_per_cycle", "1e-300", r"must be from 1e-06 to 1e\+09"),
        ("dram.latency", "1e308", r"'dram.latency' = 1e\+308: must be from 0 to 1e\+06 cycles"),
        ("caches.l1.latency", "1e300", r"'caches.l1.latency' = 1e\+300: must be from 0 to 1e\+06 cycles"),
        ("access.queue_bytes", "9223372036854775807", r"make an output queue of 73,786,976,294,838,206,456 bytes"),
        ("cores", "100000", r"'cores' = 100000: must be from 1 to 4,096"),
    ],
)
def test_set_errors_name_the_key(key: str, value: str, pattern: str) -> None:
    with pytest.raises(EmberError, match=pattern):
        load_machine("default").set(key, value)


def test_bad_override_syntax() -> None:
    with pytest.raises(EmberError, match="expected key=value"):
        load_machine("default").with_overrides(["access.lanes"])


def test_unknown_pipe_group_and_pipes() -> None:
    ex = load_machine("small").execute
    with pytest.raises(EmberError, match="unknown pipe group 'fma'.*int_alu"):
        ex.throughput("fma")
    assert ex.pipes("load") == (2, 1) and ex.pipes("int_div") == (1, 16) and ex.pipes("store") == (1, 1)


def test_machine_is_frozen() -> None:
    m = load_machine("small")
    with pytest.raises(AttributeError):
        m.clock_ghz = 1.0  # type: ignore[misc]
    assert isinstance(m, Machine)


def test_a_cache_level_named_twice_is_refused(tmp_path: Path) -> None:
    level = '[[caches]]\nname = "l1"\nsize_bytes = 1024\nways = 2\nline_bytes = 64\nlatency = 2.0\n'
    f = tmp_path / "twice.toml"
    f.write_text('base = "default"\n' + level + level)
    with pytest.raises(EmberError, match=r"machine key 'caches.l1.name' = l1: names a level twice"):
        load_machine(str(f))
