"""One fuzz case, run: a generated program through the assembler, the binary and both engines; a mutated
sample through the tool that reads it (ember-opt, ember-asm, ember-sim), and whatever that yields
which assembles through both engines as well.

Tools run in this process through their click commands, as their console scripts would run them, so
a case costs no interpreter start; the worker process around it (worker.py) catches hangs and crashes.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np

from ..backend.binary import assemble, disassemble
from ..backend.dae import Program
from ..backend.dae_text import parse_dae
from ..frontends import load_weights_any
from ..ir.diagnostics import EmberError
from ..passes.derived import link_param
from .inputs import TooLarge, synthesize
from .mutate import Mutated, apply, model_inputs, samples, samples_dir
from .oracle import Stage, Verdict, error_problem, judge_tool, run_tool, simulate_both
from .programs import Generated

NEXT_PASS = {"emb": "lower-emb", "loop": "decouple", "slc": "to-dlc", "dlc": "codegen"}
EIR_OPTIONS = ("next", "next", "-O0", "-O1", "-O3", "none", "--target=core")
BIN_OPTIONS = ("reference", "fast")


def run_case(case: Generated | Mutated, max_cycles: float, stage: Stage, workdir: Path) -> Verdict:
    try:
        if isinstance(case, Generated):
            return _generated(case, max_cycles, stage)
        return _mutated(case, max_cycles, stage, workdir)
    except TooLarge as e:  # a valid program the fuzzer cannot feed: neither a finding nor a refusal
        return Verdict("ok", f"not run on the engines: {e}")


def case_files(case: Generated | Mutated, max_cycles: float) -> tuple[dict[str, bytes], str]:
    """The input files of a case and the command that reruns it, for a case whose worker hung or died."""
    if isinstance(case, Generated):
        files = {"case.dae": case.text.encode()}
        try:
            files["case.in.npz"] = npz(synthesize(parse_dae(case.text, "case.dae"), case.input_seed))
        except (EmberError, TooLarge):
            pass
        return files, _repro("case", max_cycles, case.machine, "case.in.npz")
    source = samples()[case.base]
    if case.kind == "bin":
        name = source.name.rsplit(".", 1)[0] + ".bin"
        return {name: apply(base_binary(source), case)}, f"ember-sim {name} --engine {case.option}"
    tool = {"eir": f"ember-opt {case.option}", "dae": "ember-asm"}[case.kind]
    return {source.name: apply(source.read_bytes(), case)}, f"{tool} {source.name}"


def npz(inputs: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **inputs)
    return buf.getvalue()


def _repro(name: str, max_cycles: float, overrides: tuple[str, ...], inputs: str) -> str:
    """The commands that rerun a saved program on both engines."""
    sets = "".join(f" --set {shlex.quote(o)}" for o in overrides)
    sim = f"ember-sim {name}.bin --inputs {inputs} --max-cycles {max_cycles:g}{sets} -q --stats /dev/stdout"
    return f"ember-asm {name}.dae -o {name}.bin && {sim} --engine reference; {sim} --engine fast"


def _generated(case: Generated, max_cycles: float, stage: Stage) -> Verdict:
    stage("the assembler")
    files = {"case.dae": case.text.encode()}
    try:
        program = parse_dae(case.text, "case.dae")
    except EmberError as e:
        problem = error_problem(str(e))
        v = Verdict(*problem) if problem else Verdict("rejected", str(e).splitlines()[0][:200])
        v.files, v.command = files, "ember-asm case.dae -o case.bin"
        return v
    return _both(program, synthesize(program, case.input_seed), case.machine, max_cycles, stage, files,
                 _repro("case", max_cycles, case.machine, "case.in.npz"))


def _both(program: Program, inputs: dict[str, np.ndarray], overrides: tuple[str, ...], max_cycles: float,
          stage: Stage, files: dict[str, bytes], command: str) -> Verdict:
    """A valid program through the binary (as ember-sim loads it), then both engines."""
    stage("the binary round trip")
    try:
        data = {n: program.data[n] for n in program.data}
        program = disassemble(assemble(program), "case.bin")
        program.data.update({n: a for n, a in data.items() if n not in program.data})
    except EmberError as e:
        return Verdict("internal", f"a program that assembles does not load back from its .bin: {e}"[:300],
                       files=files, command=command)
    verdict, texts = simulate_both(program, inputs, overrides, max_cycles, stage)
    if verdict.failed:
        verdict.files = {**files, "case.in.npz": npz(inputs)}
        verdict.command = command
        verdict.report = "\n".join(f"--- {e} engine ---\n{t}" for e, t in texts.items())
    return verdict


def _mutated(case: Mutated, max_cycles: float, stage: Stage, workdir: Path) -> Verdict:
    source = samples()[case.base]
    levels = workdir / "levels"  # the levels files name their weights ../models/x.onnx
    levels.mkdir(parents=True, exist_ok=True)
    models = workdir / "models"
    if not models.exists() and samples_dir() is not None:
        models.symlink_to(samples_dir() / "models")  # type: ignore[operator]
    stem = source.name.rsplit(".", 1)[0]
    given = _model_inputs(source)
    if case.kind == "bin":
        data = apply(base_binary(source), case)
        path = levels / f"{stem}.bin"
        path.write_bytes(data)
        inputs_path = levels / f"{stem}.in.npz"
        try:
            program = disassemble(data, str(path))
            inputs = synthesize(program, case.input_seed, given)
        except (EmberError, TooLarge):  # ember-sim still gets the file, with the model's own inputs
            program, inputs = None, dict(given)
        inputs_path.write_bytes(npz(inputs))
        args = [str(path), "--inputs", str(inputs_path), "--engine", case.option, "--max-cycles",
                f"{max_cycles:g}", "-q", "--outputs", str(levels / "out.npz"), "--stats", str(levels / "stats.txt")]
        verdict = _tool("ember-sim", args, stage, {f"{stem}.bin": data, f"{stem}.in.npz": npz(inputs)},
                        workdir)
        if program is None or (verdict is not None and verdict.failed):
            return verdict or Verdict("ok", "ember-sim ran it")
        return _both(program, inputs, (), max_cycles, stage, {f"{stem}.bin": data},
                     f"ember-sim {stem}.bin --inputs {stem}.in.npz --engine reference|fast -q")
    data = apply(source.read_bytes(), case)
    path = levels / source.name
    path.write_bytes(data)
    out = levels / "out.txt"
    out.unlink(missing_ok=True)
    if case.kind == "eir":
        level = source.name.split(".")[-2]
        option = {"next": f"--pass={NEXT_PASS.get(level, 'codegen')}", "none": ""}.get(case.option, case.option)
        args = [a for a in (option, str(path), "-o", str(out)) if a]
        verdict = _tool("ember-opt", args, stage, {source.name: data}, workdir)
        if verdict is not None or not out.exists() or not out.read_text(errors="replace").startswith(".dae"):
            return verdict or Verdict("ok", "ember-opt ran it (its output is .eir)")
        dae_text = out.read_bytes()
        dae = levels / f"{stem}.dae"
        dae.write_bytes(dae_text)
        path, data = dae, dae_text
    binary = levels / "out.bin"
    binary.unlink(missing_ok=True)
    verdict = _tool("ember-asm", [str(path), "-o", str(binary)], stage, {path.name: data}, workdir)
    if verdict is not None and verdict.failed:
        return verdict
    try:  # ember-asm may refuse a valid program for want of its weights (the hand-written kernels have none)
        program = parse_dae(data.decode(), path.name)
    except (EmberError, UnicodeDecodeError):
        return verdict or Verdict("rejected", "the assembler refused it")
    if binary.exists():
        try:
            program = disassemble(binary.read_bytes(), str(binary))
        except EmberError as e:
            return Verdict("internal", f"ember-asm wrote a .bin that does not load: {e}"[:300], files={path.name: data})
    inputs = synthesize(program, case.input_seed, given)  # and data for params that have none
    return _both(program, inputs, (), max_cycles, stage, {path.name: data},
                 f"ember-asm {path.name} -o case.bin (then both engines on case.in.npz)")


def installed_tool(prog: str) -> object:
    """The click command of the installed console script `prog`: the fuzzer runs the tools by the names a user
    types (the package's entry points), and so does not import the command layer it sits below."""
    found = entry_points(group="console_scripts", name=prog)
    if not found:
        raise EmberError(f"'{prog}' is not installed: install Ember (pip install -e .) to fuzz its tools")
    return next(iter(found)).load()


def _tool(prog: str, args: list[str], stage: Stage, files: dict[str, bytes], workdir: Path) -> Verdict | None:
    """Run a tool; a failure Verdict when it failed uncleanly, a "rejected" one when it refused the input
    with a clean error, None when it succeeded.  It runs in the work directory on relative paths, so its
    messages (and the failure signatures made from them) do not name the worker's temporary directory."""
    stage(prog)
    args = [os.path.relpath(a, workdir) if a.startswith(str(workdir)) else a for a in args]
    with contextlib.chdir(workdir):
        status, stderr, escaped = run_tool(installed_tool(prog), prog, args)
    problem = judge_tool(prog, status, stderr, escaped)
    if problem is None:
        return Verdict("rejected", stderr.splitlines()[0][:200]) if status == 1 else None
    shown = [Path(a).name if a.startswith("levels/") else a for a in args]
    return Verdict(*problem, files=files, command=" ".join([prog, *shown]), report=stderr)


def _model_inputs(source: Path) -> dict[str, np.ndarray]:
    p = model_inputs(source)
    if p is None:
        return {}
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


_binaries: dict[str, bytes] = {}


def base_binary(source: Path) -> bytes:
    """The sample `.dae` assembled (with its weights), once per process."""
    key = str(source)
    if key not in _binaries:

        program = parse_dae(source.read_text(), str(source))
        if program.weights:
            weights = load_weights_any(str(source.parent / program.weights))
            for n, s in enumerate(program.symbols):
                data = link_param(weights, s.name) if s.kind == "param" else None
                if data is not None:
                    program.data[n] = data
        else:
            synthesize(program, 0)
        _binaries[key] = assemble(program)
    return _binaries[key]
