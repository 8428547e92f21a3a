"""Hostile use, special files.  Outputs that are a FIFO, a device node (private ones, with /dev/null's and
/dev/zero's numbers), a symlink to a file or a dangling one, or two names of one file; an `ember-sim --check`
that fails; inputs that are a directory, a FIFO (fed the sample, or closed at once), an empty device, or an
endless one read under a small EMBER_INPUT_BYTES / EMBER_TEXT_BYTES (or a bad value of it).

A tool runs in this process twice: on regular files (the reference), then on the special one.  It must write
through a FIFO or a device and leave it what it was, follow a symlink and keep it, write the same bytes as to a
regular file, refuse two outputs naming one file and a failed check with nothing written, refuse a directory
without saying it does not exist, refuse an endless input at its cap, and leave nothing beside its outputs.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from . import scripts
from .cases import NEXT_PASS, installed_tool, npz
from .fifos import Drain, Feed
from .material import Material
from .oracle import Stage, Verdict, judge_tool, run_tool, same_output

TOOLS = ("asm", "disasm", "opt", "sim")
OUTPUTS = ("fifo", "null", "zero", "symlink", "dangling")
SAME = ("same", "dotslash", "alias", "hardlink")  # two outputs of one command naming one file (opt, sim)
INPUTS = ("directory", "fifo-in", "silent-fifo", "zero-in", "null-in")
CAPS = ("1", "4096", "1048576", "1048577", "3145728", "0", "-1", "lots")  # the cap of a zero-in case
DEVICES = {"null": (1, 3), "zero": (1, 5), "null-in": (1, 3), "zero-in": (1, 5)}
KEEPS = {"fifo": stat.S_ISFIFO, "fifo-in": stat.S_ISFIFO, "silent-fifo": stat.S_ISFIFO, "null": stat.S_ISCHR,
         "zero": stat.S_ISCHR, "null-in": stat.S_ISCHR, "zero-in": stat.S_ISCHR, "symlink": stat.S_ISLNK,
         "dangling": stat.S_ISLNK, "directory": stat.S_ISDIR}  # what the special file must still be afterwards
OPTIONS = {"asm": ("-o",), "disasm": ("-o",), "opt": ("-o", "--stats"), "sim": ("--outputs", "--stats")}
SUFFIX = {"asm": ".bin", "disasm": ".dae", "opt": ".txt", "sim": ".npz", "--stats": ".txt"}


@dataclass(frozen=True)
class Special:
    tool: str
    kind: str
    second: bool  # the second output or input (--stats, sim's --inputs); for SAME, the file exists already
    cap: str

    def describe(self) -> str:
        second = len(OPTIONS[self.tool]) > 1 if self.kind in OUTPUTS else self.tool == "sim" and self.kind in INPUTS
        where = "second " if self.second and second else ""
        cap = f" under a cap of {self.cap}" if self.kind == "zero-in" else ""
        return f"ember-{self.tool} with a {where}{self.kind}{cap}"


def _fit(p: Special) -> Special:
    """Two outputs need opt or sim; a failing --check needs sim."""
    if (p.kind in SAME and p.tool in ("asm", "disasm")) or p.kind == "check":
        return Special("sim", p.kind, p.second, p.cap)
    return p


plans = st.builds(Special, st.sampled_from(TOOLS), st.sampled_from(OUTPUTS + SAME + ("check",) + INPUTS),
                  st.booleans(), st.sampled_from(CAPS)).map(_fit)


def bases(plan: Special, dae: list[str], eir: list[str]) -> list[str]:
    return eir if plan.tool == "opt" else dae


def _input(plan: Special, mat: Material) -> Path:
    if plan.tool == "sim" and plan.second:
        return mat.inputs  # type: ignore[return-value]
    return mat.source if plan.tool in ("asm", "opt") else mat.binary  # type: ignore[return-value]


def _args(plan: Special, mat: Material, outputs: dict[str, str], source: str | None = None) -> list[str]:
    given = source or mat.rel(_input(plan, mat))
    main = mat.rel(mat.source if plan.tool in ("asm", "opt") else mat.binary)
    if plan.tool == "opt":
        args = [f"--pass={NEXT_PASS.get(mat.source.name.split('.')[-2], 'codegen')}", given]
    elif plan.tool == "sim":
        program, inputs = (main, given) if plan.second else (given, mat.rel(mat.inputs))
        args = [program, "--inputs", inputs, "-q", "--max-cycles", "1e5"]
    else:
        args = [given]
    for option, path in outputs.items():
        args += [option, path]
    return args


def _run(plan: Special, mat: Material, args: list[str], env: dict[str, str] | None = None
         ) -> tuple[int, str, str | None]:
    prog = f"ember-{plan.tool}"
    with contextlib.chdir(mat.dir), scripts.environ(env or {}):
        return run_tool(installed_tool(prog), prog, args)


def command(plan: Special, mat: Material, max_cycles: float) -> str:
    setup = {"fifo": "mkfifo out.x; cat out.x > got &", "null": "mknod out.x c 1 3;", "zero": "mknod out.x c 1 5;",
             "symlink": "echo old > target.x; ln -s target.x out.x;", "dangling": "ln -s target.x out.x;",
             "alias": "echo kept > out.x; ln -s out.x alias.x;", "hardlink": "echo kept > out.x; ln out.x hard.x;",
             "directory": "mkdir levels/in;", "silent-fifo": "mkfifo levels/in; : > levels/in &",
             "fifo-in": f"mkfifo levels/in; cat {mat.rel(_input(plan, mat))} > levels/in &",
             "null-in": "mknod levels/in c 1 3;",
             "zero-in": f"mknod levels/in c 1 5; export EMBER_INPUT_BYTES={plan.cap} EMBER_TEXT_BYTES={plan.cap};",
             "check": "(wrong.npz: each output 12345.5);"}.get(plan.kind, "")
    args = _args(plan, mat, _outputs(plan), "levels/in" if plan.kind in INPUTS else None)
    if plan.kind == "check":
        args += ["--check", "wrong.npz"]
    return f"{setup} ember-{plan.tool} {' '.join(args)}   (in a copy of samples/: levels/ and models/)"


def _outputs(plan: Special) -> dict[str, str]:
    """The outputs of the hostile run by option: the special one is out.x."""
    options = OPTIONS[plan.tool]
    plain = {o: f"plain{SUFFIX.get(o, SUFFIX[plan.tool])}" for o in options}
    if plan.kind in INPUTS:
        return {options[0]: plain[options[0]]}
    if plan.kind == "check":
        return plain
    if plan.kind in SAME:
        alias = {"same": "out.x", "dotslash": "./out.x", "alias": "alias.x", "hardlink": "hard.x"}[plan.kind]
        return {options[0]: "out.x", options[1]: alias}
    special = options[1] if plan.second and len(options) > 1 else options[0]
    return {o: "out.x" if o == special else plain[o] for o in options}


def run(plan: Special, mat: Material, max_cycles: float, stage: Stage) -> Verdict:
    stage(f"ember-{plan.tool} on regular files")
    outputs = _outputs(plan)
    ref_out = {o: f"ref{k}{SUFFIX.get(o, SUFFIX[plan.tool])}" for k, o in enumerate(outputs)}  # beside: same paths
    ref = _run(plan, mat, _args(plan, mat, ref_out))
    if ref[0] not in (0, 1) or ref[2] is not None:  # the tool on regular files: the other kinds' business
        return Verdict("ok", "the tool fails on the regular files too")
    expected = {o: (mat.dir / p).read_bytes() for o, p in ref_out.items() if (mat.dir / p).is_file()}
    stage(f"ember-{plan.tool} with a {plan.kind}")
    return _hostile(plan, mat, outputs, ref[0] == 0, expected)


def _special(plan: Special, mat: Material) -> Path:
    return mat.dir / "levels" / "in" if plan.kind in INPUTS else mat.dir / "out.x"  # levels/: its weights resolve


def _hostile(plan: Special, mat: Material, outputs: dict[str, str], ref_ok: bool, expected: dict[str, bytes]
             ) -> Verdict:
    d, kind = mat.dir, plan.kind
    special = _special(plan, mat)
    args = _args(plan, mat, outputs, "levels/in" if kind in INPUTS else None)
    env: dict[str, str] = {}
    helper: Drain | Feed | None = None
    if kind in DEVICES:
        try:
            os.mknod(special, 0o666 | stat.S_IFCHR, os.makedev(*DEVICES[kind]))
        except OSError as e:
            return Verdict("ok", f"cannot make a device node here ({e.strerror})")
    elif kind in ("fifo", "fifo-in", "silent-fifo"):
        os.mkfifo(special)
        helper = Drain(special) if kind == "fifo" else Feed(special, _input(plan, mat).read_bytes()
                                                            if kind == "fifo-in" else None)
    elif kind in ("symlink", "dangling"):
        if kind == "symlink":
            (d / "target.x").write_bytes(b"old\n")
        special.symlink_to("target.x")
    elif kind == "directory":
        special.mkdir()
    elif kind in SAME and (plan.second or kind in ("alias", "hardlink")):
        special.write_bytes(b"kept\n")
        if kind == "alias":
            (d / "alias.x").symlink_to("out.x")
        elif kind == "hardlink":
            os.link(special, d / "hard.x")
    elif kind == "check":
        (d / "wrong.npz").write_bytes(npz({n: np.full((1,), 12345.5) for n in mat.outputs or ("y",)}))
        args += ["--check", "wrong.npz"]
    if kind == "zero-in":
        env = {"EMBER_INPUT_BYTES": plan.cap, "EMBER_TEXT_BYTES": plan.cap}
    before = set(os.listdir(d))
    try:
        status, err, escaped = _run(plan, mat, args, env)
    finally:
        got = helper.close() if helper is not None else None
    problem = judge_tool(f"ember-{plan.tool}", status, err, escaped)
    if problem is not None:
        return Verdict(*problem, report=err)
    written = set(os.listdir(d)) - before
    found = _check(plan, mat, status, err.splitlines()[0] if err else "", ref_ok, written) or (
        _compare(plan, mat, outputs, expected, got, written) if status == 0 else None)
    if found is not None:
        return Verdict(found[0], f"ember-{plan.tool} with a {kind}: {found[1]}", report=err)
    return Verdict("rejected" if status == 1 else "ok", err.splitlines()[0][:200] if status else "written through")


def _check(plan: Special, mat: Material, status: int, message: str, ref_ok: bool, written: set[str]
           ) -> tuple[str, str] | None:
    """What the status, the message and the special file say went wrong, as (verdict, detail), or None."""
    kind = plan.kind
    special = _special(plan, mat)
    mode = special.lstat().st_mode if special.is_symlink() or special.exists() else 0
    if KEEPS.get(kind, lambda _m: True)(mode) is False:
        return "crash", f"the {kind} was replaced (it is now mode {mode:o})"
    if kind in ("symlink", "dangling") and os.readlink(special) != "target.x":
        return "crash", "the symlink now points elsewhere"
    if kind == "directory" and (status != 1 or "No such file" in message):
        return "crash", f"a directory as input gave status {status}: {message[:150]!r}"
    if kind == "zero-in":
        want = f"larger than {int(plan.cap):,} bytes" if re.fullmatch(r"[1-9]\d*", plan.cap) else "positive integer"
        if status != 1 or want not in message:
            return "crash", f"an endless input under a cap of {plan.cap} gave status {status}: {message[:150]!r}"
    if kind in SAME:  # the check comes with the writing, after the run: only a run that works gets to it
        if status != 1 or ref_ok and not ("same file" in message or "a file of its own" in message):
            return "crash", f"two outputs naming one file gave status {status}: {message[:150]!r}"
        if special.exists() and special.read_bytes() != b"kept\n":
            return "crash", "refusing two outputs naming one file, it changed that file"
    if kind == "check" and status != 1:
        return "crash", f"a failed --check gave status {status}"
    if status == 1:
        if ref_ok and kind in OUTPUTS:
            return "crash", f"writing to a {kind} failed: {message[:150]!r}"
        if ref_ok and kind == "fifo-in":
            return "disagreement", f"a FIFO input was refused where the regular file is read: {message[:150]!r}"
        if kind == "symlink" and (mat.dir / "target.x").read_bytes() != b"old\n":
            return "crash", "it failed, yet wrote the symlink's target"
        return ("crash", f"it failed, yet left {sorted(written)}") if written else None
    if not ref_ok and kind not in ("silent-fifo", "null-in"):
        return "disagreement", f"it succeeded with a {kind} where the regular files fail"
    return None


def _compare(plan: Special, mat: Material, outputs: dict[str, str], expected: dict[str, bytes], got: bytes | None,
             written: set[str]) -> tuple[str, str] | None:
    """A run that succeeded: the files it left, and what it wrote, against the run on regular files."""
    d, kind = mat.dir, plan.kind
    if kind in ("silent-fifo", "null-in"):
        return None  # an empty input: whatever the tool makes of it, cleanly
    want = {Path(p).name for p in outputs.values()} - {"out.x"} | ({"target.x"} if kind == "dangling" else set())
    if written != want:
        return "crash", f"it left {sorted(written)} where {sorted(want)} were expected"
    for option, path in outputs.items():
        if path != "out.x":
            data: bytes | None = (d / path).read_bytes()
        elif kind == "fifo":
            data = got
        elif kind in ("symlink", "dangling"):
            data = (d / "target.x").read_bytes()
        else:
            continue  # a device: what went in cannot be read back
        if data is None or not same_output(data, expected.get(option, b"")):
            return "disagreement", f"its {option} output differs from the one written to a regular file"
    return None
