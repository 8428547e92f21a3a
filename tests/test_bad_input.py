"""Malformed inputs, one command each: a one-line error that says where, exit status 1, no traceback, no output.

Every case copies a good artefact (made once per module by the tools themselves) and breaks one thing.
The error line must start with `ember-<tool>: ` and then the position (`file:line:col: error:` for text,
`file: error:` for binaries and other files, `error:` for command-line problems) and contain the expected
message, which names the node, input or key at fault.  Text errors may add the source line and a caret
under the column.  Files named by `-o`, `--outputs` or `--stats` must not exist afterwards, and the tools
must leave no temporary files behind.  The commands are separate processes, so the `runs` fixture starts
the selected cases up front, a few at a time, and each test waits for its own.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import MODELS, run_here, run_tool
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

OUTPUT_FLAGS = ("-o", "--output", "--outputs", "--stats")
# How each .eir level is fed to ember-opt: the pass that comes next, and the extension of what it writes.
LEVEL_RUN = {"emb": (["-O0"], "dae"), "loop": (["--pass=decouple"], "eir"), "slc": (["--pass=to-dlc"], "eir"),
             "dlc": (["--pass=codegen"], "dae")}
LEVEL_PASSES = {"loop": "lower-emb", "slc": "lower-emb,decouple", "dlc": "lower-emb,decouple,to-dlc"}


@dataclass
class Good:
    """Artefacts the tools made from the samples: .eir at every level, .dae and .bin, plus the inputs."""

    dir: Path
    files: dict[str, Path] = field(default_factory=dict)

    def text(self, key: str) -> str:
        return self.files[key].read_text()


@dataclass
class Bad:
    """A prepared case: the arguments to run with and how the error line must begin."""

    args: list[str]
    where: str  # after "ember-<tool>: ", e.g. "/x/bad.eir:3:7: error: ", "/x/bad.bin: error: " or "error: "
    text: str | None = None  # the bad file's text when `where` is a position in it


Make = Callable[[Path, Good], Bad]


WORKERS = max(2, os.cpu_count() or 1)  # the commands are separate processes: run a few at once


def _run_ok(tool: str, *args: str) -> None:
    r = run_tool(tool, *args)
    assert r.returncode == 0, r.stderr.decode()


def _chain(model: str, eir: Path, dae: Path, binary: Path) -> None:
    """import -> opt -O0 -> asm for one sample model."""
    _run_ok("import", str(MODELS / f"{model}.onnx"), "-o", str(eir))
    _run_ok("opt", "-O0", str(eir), "-o", str(dae))
    _run_ok("asm", str(dae), "-o", str(binary))


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Good:
    """bag_sum (TorchScript export) at every level, and dlrm (dynamo export, whose offsets reach the access
    unit only through host ops) as a .bin."""
    g = Good(tmp_path_factory.mktemp("good"))
    f = g.files
    for key, name in [("emb", "bag.eir"), ("dae", "bag.dae"), ("bin", "bag.bin"), ("dlrm.eir", "dlrm.eir"),
                      ("dlrm.dae", "dlrm.dae"), ("dlrm.bin", "dlrm.bin")]:
        f[key] = g.dir / name
    f.update((level, g.dir / f"bag.{level}.eir") for level in LEVEL_PASSES)
    f["npz"], f["dlrm.npz"] = MODELS / "bag_sum.in.npz", MODELS / "dlrm.in.npz"
    with ThreadPoolExecutor(WORKERS) as pool:
        dlrm = pool.submit(_chain, "dlrm.dynamo", f["dlrm.eir"], f["dlrm.dae"], f["dlrm.bin"])
        _chain("bag_sum.ts", f["emb"], f["dae"], f["bin"])
        jobs = [pool.submit(_run_ok, "opt", f"--pass={passes}", str(f["emb"]), "-o", str(f[level]))
                for level, passes in LEVEL_PASSES.items()]
        for job in [dlrm, *jobs]:
            job.result()
    return g


def line_col(text: str, i: int) -> tuple[int, int]:
    """1-based line and column of character `i` of `text`."""
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def position(text: str, marker: str) -> tuple[int, int]:
    """Line and column of the only occurrence of `marker` in `text`."""
    assert text.count(marker) == 1, f"marker {marker!r} is not unique"
    return line_col(text, text.index(marker))


def sim_args(program: Path | str, inputs: Path | str, tmp: Path, *extra: str) -> list[str]:
    return [str(program), "--inputs", str(inputs), *extra, "--outputs", str(tmp / "out.npz"),
            "--stats", str(tmp / "stats.json"), "-q"]


# ----------------------------------------------------------------------------- case builders


def text_case(case_id: str, level: str, old: str, new: str, message: str, at: str | None = None,
              marks: tuple[pytest.MarkDecorator, ...] = ()) -> object:
    """`level` text (emb/loop/slc/dlc .eir, or dae) with `old` replaced by `new`.

    The error is expected at `at` (default: the start of `new`): inside `new` if it occurs there, else at
    its only occurrence in the edited text.
    """

    def make(tmp: Path, good: Good) -> Bad:
        text = good.text(level)
        assert text.count(old) == 1, f"{old!r} is not unique in the {level} text"
        bad = text.replace(old, new)
        mark = at if at is not None else new
        if mark in new:
            line, col = line_col(bad, text.index(old) + new.index(mark))
        else:
            line, col = position(bad, mark)
        if level == "dae":
            src, args = tmp / "bad.dae", ["-o", str(tmp / "out.bin")]
        else:
            flags, ext = LEVEL_RUN[level]
            src, args = tmp / f"bad.{level}.eir", [*flags, "-o", str(tmp / f"out.{ext}")]
        src.write_text(bad)
        return Bad([str(src), *args], f"{src}:{line}:{col}: error: ", bad)

    return pytest.param("asm" if level == "dae" else "opt", make, message, id=case_id, marks=marks)


def opt_flags_case(case_id: str, flags: list[str], message: str,
                   marks: tuple[pytest.MarkDecorator, ...] = ()) -> object:
    """ember-opt with bad command-line flags on a good emb-level file."""

    def make(tmp: Path, good: Good) -> Bad:
        return Bad([*flags, str(good.files["emb"]), "-o", str(tmp / "out.eir")], "error: ")

    return pytest.param("opt", make, message, id=case_id, marks=marks)


def bin_case(case_id: str, tool: str, corrupt: Callable[[bytes], bytes], message: str) -> object:
    """The good .bin, corrupted, given to ember-disasm or ember-sim."""

    def make(tmp: Path, good: Good) -> Bad:
        src = tmp / "bad.bin"
        src.write_bytes(corrupt(good.files["bin"].read_bytes()))
        if tool == "disasm":
            return Bad([str(src), "-o", str(tmp / "out.dae")], f"{src}: error: ")
        return Bad(sim_args(src, good.files["npz"], tmp), f"{src}: error: ")

    return pytest.param(tool, make, message, id=case_id)


def npz_case(case_id: str, change: Callable[[dict[str, np.ndarray]], None], message: str,
             model: str = "") -> object:
    """The sample inputs with `change` applied (in place), run by ember-sim; the error names the input."""
    prefix = f"{model}." if model else ""

    def make(tmp: Path, good: Good) -> Bad:
        with np.load(good.files[f"{prefix}npz"]) as z:
            arrays = {k: z[k].copy() for k in z.files}
        change(arrays)
        src = tmp / "bad.npz"
        np.savez(src, **arrays)
        return Bad(sim_args(good.files[f"{prefix}bin"], src, tmp), "error: ")

    return pytest.param("sim", make, message, id=case_id)


def onnx_case(case_id: str, build: Callable[[Path], None], message: str) -> object:
    """ember-import on a model that `build` writes (not ONNX at all, or a pattern Ember must refuse)."""

    def make(tmp: Path, good: Good) -> Bad:
        src = tmp / "bad.onnx"
        build(src)
        return Bad([str(src), "-o", str(tmp / "out.eir")], f"{src}: error: ")

    return pytest.param("import", make, message, id=case_id)


def sim_flags_case(case_id: str, flags: list[str], message: str) -> object:
    """ember-sim on a good program and inputs with bad machine flags."""

    def make(tmp: Path, good: Good) -> Bad:
        return Bad(sim_args(good.files["bin"], good.files["npz"], tmp, *flags), "error: ")

    return pytest.param("sim", make, message, id=case_id)


def missing_case(tool: str, which: str = "") -> object:
    """A command whose input file does not exist: the error names that file."""

    def make(tmp: Path, good: Good) -> Bad:
        gone = tmp / "no-such-file"
        args = {
            "import": [str(gone), "-o", str(tmp / "out.eir")],
            "opt": [str(gone), "-O0", "-o", str(tmp / "out.dae")],
            "asm": [str(gone), "-o", str(tmp / "out.bin")],
            "disasm": [str(gone), "-o", str(tmp / "out.dae")],
            "sim": sim_args(gone, good.files["npz"], tmp),
            "sim-inputs": sim_args(good.files["bin"], gone, tmp),
        }[tool + which]
        return Bad(args, f"{gone}: error: ")

    return pytest.param(tool, make, "No such file or directory", id=f"missing-file-{tool}{which}")


def not_a_file_case(tool: str, kind: str) -> object:
    """A model, or the model a .dae names for its weights, that is a directory or a FIFO: the error says what it
    is (it said 'No such file or directory'), and nobody waits on the FIFO."""

    def make(tmp: Path, good: Good) -> Bad:
        odd = tmp / "odd.onnx"
        odd.mkdir() if kind == "directory" else os.mkfifo(odd)
        args = {"import": [str(odd), "-o", str(tmp / "out.eir")],
                "asm": [str(good.files["dae"]), "--weights", str(odd), "-o", str(tmp / "out.bin")]}[tool]
        return Bad(args, f"{odd}: error: ")

    return pytest.param(tool, make, f"is a {kind}, not a model file", id=f"{kind}-as-model-{tool}")


def stdin_model_case() -> object:
    def make(tmp: Path, good: Good) -> Bad:
        return Bad(["-", "-o", str(tmp / "out.eir")], "error: ")

    return pytest.param("import", make, "a model is read from a file, not from standard input", id="stdin-as-model")


# ----------------------------------------------------------------------------- corruptions


def truncate(n: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:n] if n >= 0 else data[:len(data) + n]


def flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0x40
    return bytes(out)


def bad_magic(data: bytes) -> bytes:
    return b"EMBERBIX" + data[8:]


def future_version(data: bytes) -> bytes:
    """Version field (u16 after the 8-byte magic) set to 99, checksum recomputed: only the version is wrong."""
    out = bytearray(data)
    out[8:10] = struct.pack("<H", 99)
    out[-4:] = struct.pack("<I", zlib.crc32(bytes(out[:-4])))
    return bytes(out)


def text_instead(data: bytes) -> bytes:
    return b".dae 2\n.code\n  halt\n.end\n"


def set_item(name: str, index: int, value: int) -> Callable[[dict[str, np.ndarray]], None]:
    def change(arrays: dict[str, np.ndarray]) -> None:
        arrays[name][index] = value

    return change


def drop(name: str) -> Callable[[dict[str, np.ndarray]], None]:
    def change(arrays: dict[str, np.ndarray]) -> None:
        del arrays[name]

    return change


def replace(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[dict[str, np.ndarray]], None]:
    def change(arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = fn(arrays[name])

    return change


def not_onnx(path: Path) -> None:
    path.write_text("module {\n}\n")


def truncated_onnx(path: Path) -> None:
    path.write_bytes((MODELS / "bag_sum.ts.onnx").read_bytes()[:200])


def loop_not_a_bag(path: Path) -> None:
    """A Loop that adds 1 to a carried vector n times: structurally nothing like an EmbeddingBag."""
    body = oh.make_graph(
        [oh.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         oh.make_node("Add", ["x_in", "one"], ["x_out"], name="add_one")],
        "body",
        [oh.make_tensor_value_info("i", TensorProto.INT64, []),
         oh.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         oh.make_tensor_value_info("x_in", TensorProto.FLOAT, [4])],
        [oh.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         oh.make_tensor_value_info("x_out", TensorProto.FLOAT, [4])],
        [oh.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    graph = oh.make_graph(
        [oh.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="count_up")],
        "g",
        [oh.make_tensor_value_info("n", TensorProto.INT64, []),
         oh.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path)


def bag_on_wrong_axis(path: Path) -> None:
    """The TorchScript EmbeddingBag loop, but its ReduceSum reduces axis 1: almost a bag, so refused."""
    model = onnx.load(MODELS / "bag_sum.ts.onnx")
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    const = next(n for n in loop.attribute[0].g.node if n.output[0] == "/bag/Constant_11_output_0")
    const.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([1], dtype=np.int64)))
    onnx.save(model, path)


def custom_domain(path: Path) -> None:
    graph = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["r"], name="relu"),
         oh.make_node("FancyOp", ["r"], ["y"], name="my_fancy_op", domain="com.example")],
        "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    opsets = [oh.make_opsetid("", 17), oh.make_opsetid("com.example", 1)]
    onnx.save(oh.make_model(graph, opset_imports=opsets), path)


def type_attribute(path: Path) -> None:
    """Optional's `type` attribute is a TypeProto, which a host op's attributes cannot hold."""
    seq = oh.make_tensor_type_proto(TensorProto.FLOAT, [4])
    graph = oh.make_graph(
        [oh.make_node("Optional", [], ["o"], name="maybe", type=seq),
         oh.make_node("OptionalHasElement", ["o"], ["y"], name="has")],
        "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [oh.make_tensor_value_info("y", TensorProto.BOOL, [])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]), path)


def machine_file_case(case_id: str, text: str, at: str, message: str) -> object:
    """ember-sim --machine FILE.toml with a mistake in the file: reported at its line and column."""

    def make(tmp: Path, good: Good) -> Bad:
        src = tmp / "bad.toml"
        src.write_text(text)
        line, col = position(text, at)
        args = sim_args(good.files["bin"], good.files["npz"], tmp, "--machine", str(src))
        return Bad(args, f"{src}:{line}:{col}: error: ", text)

    return pytest.param("sim", make, message, id=case_id)


def machine_value_case(case_id: str, line: str, message: str) -> object:
    """ember-sim --machine FILE.toml whose [execute] table holds a value the timing model cannot use."""

    def make(tmp: Path, good: Good) -> Bad:
        src = tmp / "core.toml"
        src.write_text(f'base = "default"\n[execute]\n{line}\n')
        return Bad(sim_args(good.files["bin"], good.files["npz"], tmp, "--machine", str(src)), f"{src}: error: ")

    return pytest.param("sim", make, message, id=case_id)


def other_case(case_id: str, tool: str, make: Make, message: str) -> object:
    return pytest.param(tool, make, message, id=case_id)


def choose_plan_late(tmp: Path, good: Good) -> Bad:
    """choose-plan after decouple would mark nothing while its remark claimed a plan: refused at the op."""
    src = good.files["emb"]
    return Bad(["--pass=lower-emb,decouple,choose-plan,to-dlc,codegen", str(src), "-o", str(tmp / "out.dae")],
               f"{src}:")


def empty_dae(tmp: Path, good: Good) -> Bad:
    src = tmp / "bad.dae"
    src.write_text("")
    return Bad([str(src), "-o", str(tmp / "out.bin")], f"{src}:1:1: error: ", "")


def binary_as_text(tmp: Path, good: Good) -> Bad:
    src = tmp / "bad.dae"
    src.write_bytes(good.files["bin"].read_bytes())
    return Bad([str(src), "-o", str(tmp / "out.bin")], f"{src}: error: ")


def missing_weights(tmp: Path, good: Good) -> Bad:
    src = tmp / "bad.dae"
    src.write_text(re.sub(r'(?m)^\.weights .*$', '.weights "gone.onnx"', good.text("dae")))
    return Bad([str(src), "-o", str(tmp / "out.bin")], f"{tmp.resolve() / 'gone.onnx'}: error: ")


def npz_not_zip(tmp: Path, good: Good) -> Bad:
    src = tmp / "bad.npz"
    src.write_text("indices,offsets\n1,2\n")
    return Bad(sim_args(good.files["bin"], src, tmp), f"{src}: error: ")


def npy_not_npz(tmp: Path, good: Good) -> Bad:
    src = tmp / "bad.npz"
    with src.open("wb") as f:  # np.save on a file object keeps the name: a bare .npy array
        np.save(f, np.arange(13))
    return Bad(sim_args(good.files["bin"], src, tmp), f"{src}: error: ")


# ----------------------------------------------------------------------------- the table

BAG = "%output = emb.bag %bag.weight, %indices, %_bag_Concat_output_0"

CASES = [
    # .eir, level emb (ember-opt -O0)
    text_case("eir-emb-syntax", "emb", "func @main(%indices", "func @main(( %indices", "unexpected '('",
              at="( %indices"),
    text_case("eir-emb-undefined-value", "emb", BAG, BAG.replace("%indices,", "%nope,"),
              "use of undefined value %nope", at="%nope"),
    text_case("eir-emb-unknown-op", "emb", "emb.bag", "emb.bagg", "'emb.bagg' is not a known operation"),
    text_case("eir-emb-operand-count", "emb", BAG, BAG.replace(" %indices,", ""),
              "'emb.bag' expects 3..4 operands, got 2", at="emb.bag"),
    text_case("eir-emb-f32-indices", "emb", "%indices: tensor<13xi64>", "%indices: tensor<13xf32>",
              "'emb.bag' indices must hold i32 or i64, got f32", at="emb.bag"),
    text_case("eir-emb-value-defined-twice", "emb", '%bag.weight = param {name = "bag.weight"} : tensor<40x8xf32>\n',
              '%bag.weight = param {name = "bag.weight"} : tensor<40x8xf32>\n'
              '    %bag.weight = param {name = "x"} : tensor<1xf32>\n',
              "value %bag.weight is defined twice", at='%bag.weight = param {name = "x"}'),
    # .eir, level loop (ember-opt --pass=decouple)
    text_case("eir-loop-syntax", "loop", "(%8: index) {", "(%8 index) {", "unexpected 'index'", at="index"),
    text_case("eir-loop-undefined-value", "loop", "loop.addi %8, %1", "loop.addi %8, %99",
              "use of undefined value %99", at="%99"),
    text_case("eir-loop-unknown-op", "loop", "loop.addi %8, %1", "loop.muladd %8, %1",
              "'loop.muladd' is not a known operation", at="loop.muladd"),
    text_case("eir-loop-operand-count", "loop", "loop.addi %8, %1", "loop.addi %8",
              "'loop.addi' expects 2 operands, got 1", at="loop.addi %8"),
    text_case("eir-loop-f32-index", "loop", "loop.load %indices, %12", "loop.load %indices, %5",
              "'loop.load' indices must be integers, got f32", at="loop.load %indices"),
    # .eir, level slc (ember-opt --pass=to-dlc)
    text_case("eir-slc-syntax", "slc", 'slc.callback {on = "ite"} () {', 'slc.callback {on = "ite"} () {;',
              "unexpected character ';'", at=";"),
    text_case("eir-slc-head-outside-callback", "slc", "%13 = slc.mem %indices, %12 : stream<i64>\n",
              "%13 = slc.mem %indices, %12 : stream<i64>\n        %77 = slc.head %12 : index\n",
              "'slc.head' must be inside an slc.callback", at="slc.head %12"),
    text_case("eir-slc-mem-index-count", "slc", "slc.mem %_bag_Concat_output_0, %8 :",
              "slc.mem %_bag_Concat_output_0 :", "'slc.mem' memref<7xi64> needs 1 indices"),
    text_case("eir-slc-result-type", "slc", "slc.mem %indices, %12 : stream<i64>",
              "slc.mem %indices, %12 : stream<f32>", "'slc.mem' result must be stream<i64>",
              at="slc.mem %indices"),
    # .eir, level dlc (ember-opt --pass=codegen)
    text_case("eir-dlc-pop-outside-case", "dlc", "    return %output", "    %77 = dlc.pop : index\n    return %output",
              "'dlc.pop' must be directly inside a dlc.case", at="dlc.pop"),
    text_case("eir-dlc-pop-in-access-region", "dlc", "%13 = dlc.mem %indices, %12 : stream<i64>\n",
              "%13 = dlc.mem %indices, %12 : stream<i64>\n      %77 = dlc.pop : index\n",
              "'dlc.pop' is not an access-unit op", at="dlc.pop"),
    text_case("eir-dlc-tu-in-case", "dlc", "%16 = dlc.pop : index\n",
              "%16 = dlc.pop : index\n        %66 = dlc.tu %0, %2, %1 : stream<index>\n",
              "'dlc.tu' must be in the access region of a dlc.offload", at="dlc.tu"),
    text_case("eir-dlc-operand-count", "dlc", "dlc.tu %9, %11, %1, %8 :", "dlc.tu %9, %11, %1, %8, %8, %8 :",
              "'dlc.tu' expects 3..4 operands, got 6", at="dlc.tu %9"),
    text_case("eir-dlc-bad-event", "dlc", 'event = "ite"', 'event = "sometimes"',
              "'dlc.on' event must be one of beg, ite, end", at="dlc.on"),
    # ember-opt pipelines
    opt_flags_case("opt-unknown-pass", ["--pass=lower-emb,lower-everything"], "unknown pass 'lower-everything'"),
    opt_flags_case("opt-unknown-pass-option", ["--pass=lower-emb{vl=4}"], "pass 'lower-emb' has no option 'vl'"),
    opt_flags_case("opt-pass-option-without-value", ["--pass=lower-emb{fast}"],
                   "option 'fast' of 'lower-emb' needs a value"),
    opt_flags_case("opt-pass-option-unclosed", ["--pass=lower-emb{vl=4"], "missing '}' after 'lower-emb{'"),
    opt_flags_case("opt-pass-internal-field", ["--pass=lower-emb,decouple{remarks=1}", "--remarks"],
                   "pass 'decouple' has no option 'remarks'"),
    opt_flags_case("opt-pass-with-O0", ["--pass=lower-emb", "-O0"], "give either --pass or an -O level"),
    opt_flags_case("opt-unknown-level", ["-O5"], "-O5 is not an optimization level; the levels are -O0, -O1, -O2, -O3"),
    opt_flags_case("opt-bare-O-takes-the-input", ["-O"], "-O needs a level attached, -O0 .. -O3 (it got '"),
    opt_flags_case("opt-core-with-level", ["--target=core", "-O3"],
                   "--target=core runs one fixed pipeline (lower-emb,vectorize,simplify-mem,codegen): give it no -O3"),
    opt_flags_case("opt-core-with-pass", ["--target=core", "--pass=lower-emb"], "give it no --pass"),
    other_case("opt-choose-plan-after-decouple", "opt", choose_plan_late, "'choose-plan' must run before 'decouple'"),
    opt_flags_case("opt-codegen-not-last", ["--pass=lower-emb,decouple,to-dlc,codegen,verify"],
                   "codegen must be the last pass"),
    # .dae (ember-asm)
    text_case("dae-unknown-opcode", "dae", "fadd.f32 f3", "fmadd.f32 f3", "unknown opcode 'fmadd'"),
    text_case("dae-unknown-type-suffix", "dae", "fadd.f32 f3", "fadd.i7 f3", "unknown type suffix '.i7'"),
    text_case("dae-operand-count", "dae", "fadd.f32 f3, f2, f1", "fadd.f32 f3, f2",
              "'fadd' expects 3 operands, got 2", at="fadd"),
    text_case("dae-operand-kind", "dae", "fadd.f32 f3, f2, f1", "fadd.f32 f3, r2, f1",
              "'fadd' operand 2 must be an f register, got r2", at="r2, f1"),
    text_case("dae-syntax", "dae", "fadd.f32 f3, f2, f1", "fadd.f32 f3, f2,, f1", "unexpected ','",
              at=", f1"),
    text_case("dae-undefined-label", "dae", "jmp L2", "jmp L9", "label 'L9' is not defined", at="L9"),
    text_case("dae-undefined-symbol", "dae", "st f0, @9[r5, r6]", "st f0, @12[r5, r6]",
              "symbol @12 is not declared", at="@12"),
    text_case("dae-undefined-access-program", "dae", "run A0, r4", "run A7, r4",
              "access program 'A7' is not defined", at="A7"),
    text_case("dae-stream-before-definition", "dae", "  alu s1, add, t0, 1\n  mem s2, @7[s1]\n",
              "  mem s2, @7[s1]\n  alu s1, add, t0, 1\n", "s1 is used before it is defined", at="@7[s1]"),
    text_case("dae-missing-end", "dae", "  ret\n.end\n", "  ret\n", "'.code' has no matching '.end'",
              at=".code"),
    text_case("dae-work-unknown-kind", "dae", ".work bag sum", ".work pool sum",
              "unknown work kind 'pool' (expected gather, bag, qbag, ttbag, robe, dhe or scatter_rows)", at="pool"),
    text_case("dae-work-undeclared-symbol", "dae", "offsets=@7", "offsets=@70", "symbol @70 is not declared",
              at="@70"),
    text_case("dae-work-field-twice", "dae", "output=@9 empty", "output=@9 output=@9 empty",
              "field 'output' is given twice", at="output=@9 empty"),
    text_case("dae-work-missing-field", "dae", " indices=@0", "", "a bag record needs indices=@n", at=".work"),
    other_case("dae-empty-file", "asm", empty_dae, "empty file: expected '.dae 2'"),
    other_case("dae-binary-file", "asm", binary_as_text, "not a text file"),
    other_case("dae-missing-weights-file", "asm", missing_weights, "no such file (the .weights of"),
    # .bin (ember-disasm, ember-sim)
    bin_case("bin-empty", "disasm", truncate(0), "file is empty"),
    bin_case("bin-truncated-in-magic", "disasm", truncate(5), "file is truncated (5 bytes"),
    bin_case("bin-truncated-in-header", "sim", truncate(12), "file is truncated (12 bytes"),
    bin_case("bin-truncated-in-table", "disasm", truncate(40), "file is truncated (40 of"),
    bin_case("bin-truncated-in-sections", "sim", truncate(1000), "file is truncated (1000 of"),
    bin_case("bin-truncated-checksum", "disasm", truncate(-1), "file is truncated"),
    bin_case("bin-flipped-byte", "disasm", flip, "bad checksum"),
    bin_case("bin-flipped-byte-sim", "sim", flip, "bad checksum"),
    bin_case("bin-wrong-magic", "disasm", bad_magic, "not an ember binary"),
    bin_case("bin-future-version", "sim", future_version, "unsupported format version 99"),
    bin_case("bin-text-file", "sim", text_instead, "not an ember binary"),
    # .npz inputs (ember-sim)
    npz_case("npz-missing-input", drop("offsets"), "input 'offsets' is missing"),
    npz_case("npz-wrong-dtype", replace("indices", lambda a: a.astype(np.float32)),
             "input 'indices' has dtype float32, expected int64"),
    npz_case("npz-wrong-static-dim", replace("indices", lambda a: a[:5]),
             "input 'indices' has shape [5], expected [13]"),
    npz_case("npz-wrong-rank", replace("offsets", lambda a: a.reshape(2, 3)),
             "input 'offsets' has shape [2, 3], expected [6]"),
    other_case("npz-not-a-zip", "sim", npz_not_zip, "not an .npz file"),
    other_case("npz-bare-npy", "sim", npy_not_npz, "not an .npz file"),
    npz_case("npz-index-out-of-range", set_item("indices", 3, 999),
             "input 'indices'[3] = 999 is out of range for param 'bag.weight' with 40 rows"),
    npz_case("npz-negative-index", set_item("indices", 5, -1), "input 'indices'[5] = -1 is out of range"),
    npz_case("npz-offsets-past-end", set_item("offsets", 5, 20),
             "(Concat of input 'offsets', temp 't6')[5] = 20 bounds a loop that runs past the end of "
             "input 'indices' with 13 elements"),
    npz_case("npz-offsets-past-end-dlrm-dynamo", set_item("off0", 5, 40),
             "(Concat of input 'off0', param 'indices_size')[5] = 40 bounds a loop that runs past the end of "
             "temp 't16' (Reshape of input 'idx0'", model="dlrm"),
    npz_case("npz-negative-offset", set_item("offsets", 1, -2),
             "(Concat of input 'offsets', temp 't6')[1] = -2 bounds a loop that runs before the start"),
    # ONNX (ember-import)
    onnx_case("onnx-not-onnx", not_onnx, "not a valid ONNX model"),
    onnx_case("onnx-truncated", truncated_onnx, "not a valid ONNX model"),
    onnx_case("onnx-loop-not-a-bag", loop_not_a_bag, "node 'count_up' (Loop): unsupported pattern"),
    onnx_case("onnx-bag-on-wrong-axis", bag_on_wrong_axis,
              "node '/bag/Loop' (Loop): unsupported pattern: the bag reduction should reduce over axis 0"),
    onnx_case("onnx-type-attribute", type_attribute,
              "node 'maybe' (Optional): attribute 'type' of type TYPE_PROTO is not supported; docs/operators.md"),
    onnx_case("onnx-custom-domain", custom_domain,
              "node 'my_fancy_op' (FancyOp): unsupported operator domain 'com.example'"),
    # machines (ember-sim)
    sim_flags_case("machine-unknown-preset", ["--machine", "cray-1"], "unknown machine preset 'cray-1'"),
    sim_flags_case("machine-set-unknown-key", ["--set", "access.warp_drive=1"],
                   "unknown machine key 'access.warp_drive'"),
    sim_flags_case("machine-set-bad-value", ["--set", "access.lanes=many"],
                   "machine key 'access.lanes' expects an integer, got 'many'"),
    sim_flags_case("machine-set-zero", ["--set", "access.lanes=0"], "machine key 'access.lanes' = 0"),
    sim_flags_case("machine-set-no-value", ["--set", "access.lanes"], "bad --set 'access.lanes'"),
    machine_file_case("machine-file-syntax", 'base = "default"\n[access]\nlanes = = 4\n', "= 4",
                      "Invalid value"),
    machine_value_case("machine-issue-width-zero", "issue_width = 0",
                       "machine key 'execute.issue_width' = 0: must be from 1 to 1,048,576"),
    machine_value_case("machine-negative-latency", "fp_alu_latency = -4.0",
                       "machine key 'execute.fp_alu_latency' = -4.0: must be from 0 to 1e+06 cycles"),
    machine_value_case("machine-zero-throughput", "store_throughput = 0",
                       "machine key 'execute.store_throughput' = 0.0: must be from 1/64 to 1024 cycles"),
    # input files that do not exist
    missing_case("import"),
    missing_case("opt"),
    missing_case("asm"),
    missing_case("disasm"),
    missing_case("sim"),
    missing_case("sim", "-inputs"),
    # a model that is not a regular file
    not_a_file_case("import", "directory"),
    not_a_file_case("import", "FIFO"),
    not_a_file_case("asm", "directory"),
    not_a_file_case("asm", "FIFO"),
    stdin_model_case(),
]


Outcome = tuple[Bad, Path, subprocess.CompletedProcess[bytes]]


def _prepare_and_run(tool: str, make: Make, tmp: Path, good: Good) -> Outcome:
    bad = make(tmp, good)
    return bad, tmp, run_here(tool, *bad.args)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, good: Good,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Outcome]]]:
    """Every selected case, prepared in its own directory and run in the background, a few at a time."""
    selected = {item.callspec.id for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    # The commands run in this process (an interpreter start each cost more than most cases; real processes are
    # test_outputs.py's and test_usage_errors.py's).  They swap the standard streams, which pytest's capture swaps
    # too between tests: only a run before any test, one at a time, is safe.
    with ThreadPoolExecutor(1) as pool:
        futures = {case.id: pool.submit(_prepare_and_run, *case.values[:2], tmp_path_factory.mktemp(case.id), good)
                   for case in CASES if case.id in selected}
        wait(futures.values())
        yield futures


@pytest.mark.parametrize(("tool", "make", "message"), CASES)
def test_bad_input(tool: str, make: Make, message: str, runs: dict[str, Future[Outcome]],
                   request: pytest.FixtureRequest) -> None:
    bad, tmp, r = runs[request.node.callspec.id].result()
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    assert "Traceback" not in out + err
    assert r.returncode == 1, f"exit status {r.returncode}\n{err}"
    assert out == "", "nothing may reach stdout when the output goes to a file"
    lines = err.splitlines()
    assert lines, "no error message"
    head = lines[0]
    assert head.startswith(f"ember-{tool}: {bad.where}"), err
    assert message in head, err
    pos = re.fullmatch(r".*:(\d+):(\d+): error: ", bad.where)
    if bad.text is not None and pos and len(lines) == 3:  # optional source line and caret
        line, col = int(pos[1]), int(pos[2])
        assert lines[1] == bad.text.splitlines()[line - 1].rstrip(), err
        assert lines[2] == " " * (col - 1) + "^", err
    else:
        assert len(lines) == 1, err
    for flag, value in zip(bad.args, bad.args[1:]):
        if flag in OUTPUT_FLAGS:
            assert not Path(value).exists(), f"{flag} {value} was written despite the error"
    leftovers = [p.name for p in tmp.iterdir() if p.name.startswith(".")]
    assert not leftovers, f"temporary files left behind: {leftovers}"


def test_list_passes_prints_presets_as_they_are_typed(good: Good, tmp_path: Path) -> None:
    """Each preset line of --list-passes is an option (or a name in parentheses) and the same pipeline as --pass;
    both forms must parse (a printed '-paper-O3' parsed as '-p aper-O3') and compile alike."""
    from click.testing import CliRunner

    from ember.cli.opt import main

    def opt(*args: str) -> bytes:
        out = tmp_path / "out.dae"
        r = CliRunner().invoke(main, [*args, str(good.files["emb"]), "-o", str(out)])
        assert r.exit_code == 0, f"{args}: {r.output}"
        return out.read_bytes()

    output = CliRunner().invoke(main, ["--list-passes"]).output
    assert max(map(len, output.splitlines())) <= 100
    listing = output.split("\nPresets:", 1)[1].splitlines()[1:]
    table: dict[str, str] = {}  # a label's line, then its pipeline wrapped after commas on lines indented deeper
    for line in listing:
        if line.startswith("  ") and not line.startswith("    "):
            label = line.strip()
            table[label] = ""
        else:
            table[label] += line.strip()
    assert {"-O0", "-O1", "-O2", "-O3", "--target=core", "-Opaper-O3", "(-O3 without choose-plan)"} <= set(table)
    for label, pipeline in table.items():
        assert pipeline.startswith("--pass="), label
        by_pass = opt(pipeline)
        if label.startswith("-"):
            assert opt(label) == by_pass, label
    o3 = table["-O3"]
    assert table["(-O3 without choose-plan)"] == o3.replace("choose-plan,", "") != o3
