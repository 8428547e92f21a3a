"""What a hostile case works on: a small sample program, assembled, with inputs, laid out in the case's
directory as a user has it (levels/x.dae, with ../models holding the weights it names), or a program that
never ends, for the signals to stop."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backend.binary import assemble, disassemble
from ..backend.dae_text import parse_dae
from .cases import base_binary, npz
from .inputs import synthesize
from .mutate import model_inputs, samples, samples_dir

MAX_SOURCE = 8 << 10  # the small samples: each case runs them several times, as separate processes too
SPIN = "spin"  # the never-ending program's name among the bases
SPIN_TEXT = """.dae 2
.sym @0 input "x" i64 [1]
.sym @1 output "y" i64 [1]
.code
  li r1, 0
top:
  add r1, r1, 1
  jmp top
.end
"""


def bases(names: list[str], suffix: str) -> list[str]:
    """The small samples of one kind (".dae" or ".eir")."""
    all_ = samples()
    return [n for n in names if n.endswith(suffix) and all_[n].stat().st_size <= MAX_SOURCE]


@dataclass
class Material:
    dir: Path
    source: Path  # the text: levels/NAME.dae or .eir
    binary: Path | None = None  # levels/NAME.bin, for a .dae
    inputs: Path | None = None  # levels/NAME.in.npz
    outputs: tuple[str, ...] = ()  # the program's output names

    def rel(self, path: Path | None) -> str:
        """A path as the tools are given it: relative to the case directory, so messages name no temporary."""
        assert path is not None
        return str(path.relative_to(self.dir))

    def files(self) -> dict[str, bytes]:
        """The files to save with a failure, by name."""
        return {p.name: p.read_bytes() for p in (self.source, self.binary, self.inputs) if p is not None and p.exists()}


def prepare(base: str, seed: int, directory: Path) -> Material:
    """The case directory, emptied, with `base` (a sample name, or SPIN) in it."""
    shutil.rmtree(directory, ignore_errors=True)
    levels = directory / "levels"
    levels.mkdir(parents=True)
    if samples_dir() is not None:
        (directory / "models").symlink_to(samples_dir() / "models")  # type: ignore[operator]
    if base == SPIN:
        source, text = levels / "spin.dae", SPIN_TEXT
    else:
        original = samples()[base]
        source, text = levels / original.name, original.read_text()
    source.write_text(text)
    if source.suffix != ".dae":
        return Material(directory, source)
    stem = source.name.rsplit(".", 1)[0]
    data = assemble(parse_dae(text, source.name)) if base == SPIN else base_binary(samples()[base])
    binary = levels / f"{stem}.bin"
    binary.write_bytes(data)
    program = disassemble(data, binary.name)
    given = {}
    found = None if base == SPIN else model_inputs(samples()[base])
    if found is not None:
        with np.load(found) as z:
            given = {k: z[k] for k in z.files}
    inputs = levels / f"{stem}.in.npz"
    inputs.write_bytes(npz(synthesize(program, seed, given)))
    outputs = tuple(s.name for s in program.symbols if s.kind == "output")
    return Material(directory, source, binary, inputs, outputs)
