"""The ISA rules the assembler enforces (docs/isa.md), in `.dae` text, in built programs and in binaries at load.

Each rule is broken once per form it can take, and the error must name the rule and point at the operand
at fault; the legal edge cases next to each rule (MAX_LANES lanes, a bound exactly at the overflow limit,
a register written on one branch only) must pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import run_tool

from ember.backend import binary
from ember.backend.binary import assemble, disassemble
from ember.backend.dae import INT64_MAX, INT64_MIN, MAX_LANES, Access, Instr, Label, Program, Reg, Symbol
from ember.backend.dae_check import validate
from ember.backend.dae_text import parse_dae
from ember.ir.diagnostics import EmberError, Loc
from ember.ir.parser import parse_module
from ember.passes import make_pass

HEAD = '.dae 2\n.sym @0 output "y" i64 [4]\n.sym @1 output "z" f32 [4]\n'
LANES = f"from 1 to {MAX_LANES}"
NEVER = "no path from the start of the program writes it"
SOME = "not written on every path"


def code(*lines: str, access: str = "") -> str:
    """A program: the header, an access section and `.code` with the given lines (labels end in ':')."""
    body = "\n".join(x if x.endswith(":") else "  " + x for x in lines)
    return HEAD + access + ".code\n" + body + "\n.end\n"


def one_tu(*lines: str) -> str:
    """An access program A with no parameters, for access-unit rules."""
    return ".access A 1\n" + "".join("  " + x + "\n" for x in lines) + ".end\n"


def fails(text: str, message: str, line: str, operand: str) -> None:
    """Parsing `text` fails with `message`, at the last `operand` of the first line that contains `line`."""
    with pytest.raises(EmberError) as e:
        parse_dae(text, "t.dae")
    lines = text.splitlines()
    n = next(i for i, x in enumerate(lines) if line in x)
    assert message in e.value.message
    assert e.value.where == Loc("t.dae", n + 1, lines[n].rfind(operand) + 1), e.value.render()


# ----------------------------------------------------------------------------- lane counts


@pytest.mark.parametrize("ins, bad", [
    ("vsplat.f32 v0, f0, 0", "0"), ("viota v0, 0, -3", "-3"), ("vmask v0, 0, 4, r1", "r1"),
    ("vsplat.f32 v0, f0, 100000000000", "100000000000"), (f"viota v0, 0, {MAX_LANES + 1}", str(MAX_LANES + 1))])
def test_a_lane_count_is_a_constant_from_1_to_max_lanes(ins: str, bad: str) -> None:
    fails(code("li f0, 1.0", "li r1, 4", ins, "halt"), f"needs a lane count that is an integer {LANES}", ins, bad)


def test_a_vector_traversal_unit_takes_the_same_lane_counts() -> None:
    text = code("run A, 4", "halt", access=one_tu("vtu t0, 0, p0, 0"))
    fails(text, f"'vtu' needs a lane count that is an integer {LANES} (MAX_LANES), got 0", "vtu", "0")
    parse_dae(code("run A, 4", "halt", access=one_tu(f"vtu t0, 0, p0, {MAX_LANES}")), "t.dae")


def test_max_lanes_lanes_are_accepted() -> None:
    n = MAX_LANES
    p = parse_dae(code("li f0, 1.0", f"vsplat.f32 v0, f0, {n}", f"viota v1, 0, {n}", f"vmask v2, 0, 4, {n}",
                       "vst v0, @1[0], v2", "halt"), "t.dae")
    assert [ins.args[-1] for ins in p.code[1:4]] == [n, n, n]


def test_vectorize_refuses_a_width_past_max_lanes() -> None:
    for vl in (-1, MAX_LANES + 1):
        with pytest.raises(EmberError, match=f"option 'vl' must be a lane count {LANES}"):
            make_pass("vectorize", {"vl": str(vl)})
    assert make_pass("vectorize", {"vl": str(MAX_LANES)}).vl == MAX_LANES  # type: ignore[attr-defined]
    assert make_pass("vectorize", {"vl": "0"}).vl == 0  # type: ignore[attr-defined]  # 0: the machine's width


# ----------------------------------------------------------------------------- immediates


@pytest.mark.parametrize("lines, at, bad", [
    (["li r0, 9223372036854775808"], "li r0", "9223372036854775808"),
    (["li r0, -9223372036854775809"], "li r0", "-9223372036854775809"),
    (["li f0, 9223372036854775808"], "li f0", "9223372036854775808"),  # an integer literal, even into f
    (["li r0, 1", "st r0, @0[18446744073709551616]"], "st", "@0"),
    (["alloc @0, [99999999999999999999]"], "alloc", "99999999999999999999"),
    (["li r0, 1", "blt r0, 9223372036854775808, L", "L:"], "blt", "9223372036854775808")])
def test_integer_immediates_fit_in_int64(lines: list[str], at: str, bad: str) -> None:
    fails(code(*lines, "halt"), "is out of the 64-bit range", at, bad)


@pytest.mark.parametrize("ins", ["tu t0, 0, 18446744073709551616, 1",
                                 "tu t0, 0, 4, 1\n  on t0, ite, [-9223372036854775809], 1"])
def test_access_unit_immediates_fit_in_int64(ins: str) -> None:
    text = code("run A, 4", "halt", "A.1:", "pop r0", "ret", access=one_tu(ins))
    bad = ins.split(", ")[-2].strip("[]") if "on" in ins else "18446744073709551616"
    fails(text, "is out of the 64-bit range", bad, bad)


def test_the_int64_extremes_are_accepted() -> None:
    p = parse_dae(code(f"li r0, {INT64_MAX}", f"li r1, {INT64_MIN}", "add r2, r0, r1", "halt"), "t.dae")
    assert [ins.args[1] for ins in p.code[:2]] == [INT64_MAX, INT64_MIN]


@pytest.mark.parametrize("lines, at, bad, message", [
    (["li r0, 1.5"], "li r0", "1.5", "'li' into an r register needs an integer or an r register, got 1.5"),
    (["li f0, 2.0", "li r0, f0"], "li r0", "f0", "'li' into an r register needs an integer"),
    (["li f0, 2.0", "mov r0, f0"], "mov", "f0", "'mov' into an r register needs an integer"),
    (["li r0, 1", "li f0, 2.0", "sel f1, r0, f0, r0"], "sel", "r0", "'sel' needs its destination and both values")])
def test_an_r_register_holds_only_integers(lines: list[str], at: str, bad: str, message: str) -> None:
    fails(code(*lines, "halt"), message, at, bad)


def test_f_registers_take_integers_and_integer_registers() -> None:
    parse_dae(code("li f0, 1", "li r0, 2", "mov f1, r0", "fadd.f32 f2, f0, f1", "halt"), "t.dae")


def test_dim_reads_a_constant_dimension() -> None:
    fails(code("li r1, 0", "dim r0, @0, r1", "halt"), "'dim' needs a dimension number that is an integer constant",
          "dim", "r1")
    fails(code("dim r0, @0, 1", "halt"), "@0 has rank 1: no dimension 1", "dim", "1")


def test_a_float_element_never_reaches_an_integer() -> None:
    fails(code("ld r0, @1[0]", "halt"), "'ld' of r0 needs a symbol of integers, @1 is f32", "ld", "@1")
    fails(code("li f0, 1.5", "st f0, @0[0]", "halt"), "'st' of f0 needs a symbol of floats, @0 is i64", "st", "@0")
    parse_dae(code("ld f0, @0[0]", "li r0, 3", "st r0, @1[0]", "halt"), "t.dae")  # integers become floats


def test_an_on_rule_may_push_an_integer_constant() -> None:
    """The grammar gives `on` pushes the access unit's operands, integers included (docs/isa.md)."""
    text = code("alloc @0, [4]", "run A, 4", "halt", "A.1:", "pop r0", "pop r1", "st r1, @0[r0]", "ret",
                access=one_tu("tu t0, 0, p0, 1", "on t0, ite, [t0, 7], 1"))
    assert parse_dae(text, "t.dae").access[0].body[1].args[2][1] == 7


# ----------------------------------------------------------------------------- registers


@pytest.mark.parametrize("lines, at, bad", [
    (["add r0, r1, 1"], "add", "r1"),
    (["li f0, 1.0", "fadd.f32 f2, f0, f1"], "fadd", "f1"),
    (["li r0, 1", "st r0, @0[r2]"], "st", "r2"),
    (["alloc @0, [r3]"], "alloc", "r3"),
    (["li r0, 0", "beq r0, 1, L", "li r5, 2", "L:", "add r5, r5, r6"], "add r5", "r6")])
def test_a_read_of_a_register_no_path_writes_is_refused(lines: list[str], at: str, bad: str) -> None:
    where = "@0" if "@0[" in at + lines[-1] else bad  # an index is reported at its memory operand
    fails(code(*lines, "halt"), f"{bad} is read here but {NEVER}", at, where)


def test_a_register_written_on_one_branch_only_is_accepted() -> None:
    parse_dae(code("li r0, 0", "beq r0, 1, L", "li r5, 2", "L:", "st r5, @0[0]", "halt"), "t.dae")


def test_a_vector_must_be_written_on_every_path() -> None:
    lines = ["li r0, 0", "vmask v2, 0, 4, 4", "beq r0, 1, L", "viota v1, 0, 4", "L:", "vst v1, @0[0], v2", "halt"]
    fails(code(*lines), f"v1 is read here but {SOME}", "vst", "v1")
    fails(code(*lines[:3], *lines[4:]), f"v1 is read here but {NEVER}", "vst", "v1")  # written on no path
    parse_dae(code("viota v1, 0, 4", *lines), "t.dae")  # written before the branch too


def test_a_register_written_in_a_loop_is_written_on_its_next_trip() -> None:
    parse_dae(code("li r0, 0", "L:", "beq r0, 1, M", "li r1, 3", "li r0, 1", "jmp L", "M:", "st r1, @0[0]",
                   "halt"), "t.dae")


TWO_CASES = one_tu("tu t0, 0, p0, 1", "on t0, beg, [], 1", "on t0, ite, [t0], 2")


def test_registers_flow_through_callbacks() -> None:
    """`run A` reaches every case of A, and each case's `ret` the other cases and the code after the run."""
    ok = [
        ["A.1:", "st r5, @0[0]", "ret", "A.2:", "pop r0", "li r5, 1", "ret"],  # case 2 then case 1
        ["A.1:", "li r5, 1", "ret", "A.2:", "pop r0", "st r5, @0[r0]", "ret"],
    ]
    for cases in ok:
        parse_dae(code("alloc @0, [4]", "run A, 4", "halt", *cases, access=TWO_CASES), "t.dae")
    parse_dae(code("alloc @0, [4]", "run A, 4", "st r5, @0[0]", "halt", "A.1:", "li r5, 1", "ret", "A.2:",
                   "pop r0", "ret", access=TWO_CASES), "t.dae")
    # written after the run only: no path reaches a case from there
    fails(code("run A, 4", "li r5, 1", "halt", "A.1:", "ret", "A.2:", "pop r0", "st r5, @0[r0]", "ret",
               access=TWO_CASES), f"r5 is read here but {NEVER}", "st r5", "r5")


def test_a_vector_written_in_one_callback_is_unknown_in_another() -> None:
    """The ite case can run first (or alone), so the beg case's vector is not written on every path."""
    cases = ["A.1:", "viota v1, 0, 4", "ret", "A.2:", "pop r0", "vmask v2, 0, 4, 4", "vst v1, @0[0], v2", "ret"]
    fails(code("run A, 4", "halt", *cases, access=TWO_CASES), f"v1 is read here but {SOME}", "vst", "v1")
    parse_dae(code("viota v1, 0, 4", "run A, 4", "halt", *cases, access=TWO_CASES), "t.dae")


def test_code_no_path_reaches_is_not_checked() -> None:
    parse_dae(code("halt", "add r0, r9, 1", "halt"), "t.dae")


# ----------------------------------------------------------------------------- traversal units


@pytest.mark.parametrize("tu, bad, message", [
    ("tu t0, 0, 10, 0", "0", "a traversal unit's step must be at least 1, got 0"),
    ("tu t0, 0, 10, -2", "-2", "a traversal unit's step must be at least 1, got -2"),
    (f"tu t0, 0, {INT64_MAX}, 2", str(INT64_MAX), f"t0 can overflow its counter: ub - 1 + step = {INT64_MAX + 1}"),
    (f"tu t0, p0, {INT64_MAX - 3}, 1073741824", str(INT64_MAX - 3), "t0 can overflow its counter"),
    (f"vtu t0, 0, {INT64_MAX - 6}, 8", str(INT64_MAX - 6), "ub - 1 + lane count = 9223372036854775808 is past")])
def test_a_traversal_unit_that_can_overflow_is_refused(tu: str, bad: str, message: str) -> None:
    fails(code("run A, 4", "halt", access=one_tu(tu)), message, tu, bad)


@pytest.mark.parametrize("tu", [f"tu t0, 0, {INT64_MAX}, 1", f"tu t0, {INT64_MIN}, {INT64_MAX - 9}, 10",
                                f"vtu t0, 0, {INT64_MAX - 7}, 8", "tu t0, 0, p0, p0", f"tu t0, 0, p0, {INT64_MAX}"])
def test_a_traversal_unit_exactly_at_the_limit_or_with_run_time_bounds_is_accepted(tu: str) -> None:
    parse_dae(code("run A, 4", "halt", access=one_tu(tu)), "t.dae")


# ----------------------------------------------------------------------------- .eir opset


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1.5", "-1", '"17"', "true", "99999999999999999999"])
def test_an_eir_opset_must_be_an_integer(value: str) -> None:
    text = "module attributes {weights = \"w\", opset = VALUE} {\n}\n".replace("VALUE", value)
    with pytest.raises(EmberError, match="module attribute 'opset' must be an ONNX opset version") as e:
        parse_module(text, "m.eir")
    assert e.value.where == Loc("m.eir", 1, text.index("opset = ") + 1 + (0 if value == "true" else 8))


# ----------------------------------------------------------------------------- the tools


def test_ember_asm_reports_each_rule_at_its_position(tmp_path: Path) -> None:
    for name, text, at, message in [
            ("lanes", code("li f0, 0.0", "vsplat.f32 v0, f0, 0", "halt"), (6, 22), "needs a lane count"),
            ("unwritten", code("li r0, 1", "add r0, r0, r7", "halt"), (6, 15), f"r7 is read here but {NEVER}")]:
        src, out = tmp_path / f"{name}.dae", tmp_path / f"{name}.bin"
        src.write_text(text)
        r = run_tool("asm", str(src), "-o", str(out))
        err = r.stderr.decode()
        assert r.returncode == 1 and "Traceback" not in err
        assert err.startswith(f"ember-asm: {src}:{at[0]}:{at[1]}: error: ") and message in err.splitlines()[0]
        assert not out.exists()


def built(*items: Instr | Label, access: list[Access] | None = None) -> Program:
    return Program([Symbol("output", "y", "i64", (4,))], access or [], list(items))


BROKEN = {  # programs `validate` refuses, built directly: what a hand-made or corrupted .bin could hold
    "lanes": (built(Instr("li", [Reg("f", 0), 0.0]), Instr("vsplat.f32", [Reg("v", 0), Reg("f", 0), 0]),
                    Instr("halt")), "code item 1 ('vsplat.f32'): 'vsplat' needs a lane count"),
    "li float": (built(Instr("li", [Reg("r", 0), 1.5]), Instr("halt")),
                 "code item 0 ('li'): 'li' into an r register needs an integer"),
    "unwritten": (built(Instr("st", [Reg("r", 3), binary.Mem(0, (0,))]), Instr("halt")),
                  f"code item 0 ('st'): r3 is read here but {NEVER}"),
    "shape": (Program([Symbol("output", "y", "i64", (INT64_MAX + 1,))], [], [Instr("halt")]),
              "symbol @0: a shape is a list of extents from 0 to 2^63 - 1, or '?'"),
    "overflow": (built(Instr("run", ["A"]), Instr("halt"),
                       access=[Access("A", 0, [Instr("tu", [Reg("t", 0), 0, INT64_MAX, 2])])]),
                 "access program A, instruction 0 ('tu'): t0 can overflow its counter"),
}


def unchecked_bin(p: Program, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """`p` encoded as the assembler would, without the checks the assembler makes first."""
    with monkeypatch.context() as m:
        m.setattr(binary, "validate", lambda *a, **k: None)
        return assemble(p)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_binary_is_verified_when_loaded(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    p, message = BROKEN[case]
    with pytest.raises(EmberError) as e:
        validate(p)
    assert message in str(e.value)
    data = unchecked_bin(p, monkeypatch)
    with pytest.raises(EmberError) as e:
        disassemble(data, "x.bin")
    assert e.value.where == "x.bin" and message in e.value.message


def test_ember_sim_refuses_a_binary_that_breaks_a_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p, message = BROKEN["unwritten"]
    prog, inputs, outputs = tmp_path / "p.bin", tmp_path / "in.npz", tmp_path / "out.npz"
    prog.write_bytes(unchecked_bin(p, monkeypatch))
    np.savez(inputs)
    r = run_tool("sim", str(prog), "--inputs", str(inputs), "--outputs", str(outputs))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err and "internal error" not in err
    assert err.strip() == f"ember-sim: {prog}: error: {message}"
    assert not outputs.exists()
