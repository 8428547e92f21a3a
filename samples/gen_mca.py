"""Run llvm-mca on every x86 kernel in ember/bench/kernels and store what it reports.

Each ``<name>.s`` there is the x86-64 AVX-512 equivalent of one DAE kernel (or a calibration loop),
with a header naming the DAE code it mirrors, what one iteration is and the llvm-mca command. For
each one this script writes ``<name>.mca.txt`` (llvm-mca's full output) and the summary
``mca.json``, which the simulator's cycles per iteration are checked against.

    python samples/gen_mca.py            # regenerate the outputs
    python samples/gen_mca.py --check    # re-run llvm-mca, compare with the stored outputs, write nothing

Needs llvm-mca: `llvm-mca` or `llvm-mca-14` on PATH, or --llvm-mca PATH. LLVM 14 made the stored
outputs (Debian/Ubuntu: `apt-get install llvm-14`); other versions model Ice Lake differently, so
--check then reports differences.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "ember" / "bench" / "kernels"
MCPU = "icelake-server"
TRIPLE = "x86_64-unknown-linux-gnu"
ITERATIONS = 1000  # llvm-mca repeats each block this often: the steady state

SUMMARY = {  # the llvm-mca summary lines read, and the type of each value
    "Iterations": int,
    "Instructions": int,
    "Total Cycles": int,
    "Dispatch Width": int,
    "Block RThroughput": float,
}


class McaError(Exception):
    pass


def command(llvm_mca: str, source: Path, iterations: int) -> list[str]:
    """The llvm-mca command line for one kernel, with the kernel's path relative to the repository root."""
    return [llvm_mca, f"-mtriple={TRIPLE}", f"-mcpu={MCPU}", f"-iterations={iterations}",
            source.relative_to(ROOT).as_posix()]


def version(llvm_mca: str) -> str:
    out = subprocess.run([llvm_mca, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"LLVM version (\S+)", out)
    if m is None:
        raise McaError(f"cannot read a version from `{llvm_mca} --version`")
    return m.group(1)


def parse(text: str, name: str) -> dict[str, Any]:
    """The summary numbers of one llvm-mca report."""
    found: dict[str, Any] = {}
    for key, kind in SUMMARY.items():
        m = re.search(rf"^{key}:\s+(\S+)$", text, re.MULTILINE)
        if m is None:
            raise McaError(f"{name}: llvm-mca's output has no '{key}:' line")
        found[key] = kind(m.group(1))
    its, ins = found["Iterations"], found["Instructions"]
    if ins % its:
        raise McaError(f"{name}: {ins} instructions is not a whole number per iteration of {its}")
    return {"instructions_per_iteration": ins // its,
            "cycles_per_iteration": found["Total Cycles"] / its,
            "block_rthroughput": found["Block RThroughput"],
            "dispatch_width": found["Dispatch Width"]}


def run_one(llvm_mca: str, source: Path, iterations: int) -> tuple[str, dict[str, Any]]:
    """llvm-mca's output for one kernel and its mca.json entry."""
    argv = command(llvm_mca, source, iterations)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise McaError(f"{source.name}: llvm-mca failed:\n{done.stderr.strip()}")
    shown = " ".join(["llvm-mca", *argv[1:]])
    if shown not in source.read_text():
        raise McaError(f"{source.name}: its header does not give the command `{shown}`")
    entry = {"command": shown, **parse(done.stdout, source.name)}
    return done.stdout, entry


def run_all(llvm_mca: str, folder: Path, iterations: int) -> tuple[dict[str, Any], dict[str, str]]:
    sources = sorted(folder.glob("*.s"))
    if not sources:
        raise McaError(f"no kernels (*.s) in {folder}")
    texts: dict[str, str] = {}
    kernels: dict[str, Any] = {}
    for source in sources:
        texts[source.stem], kernels[source.stem] = run_one(llvm_mca, source, iterations)
    summary = {"llvm_mca_version": version(llvm_mca), "mcpu": MCPU, "iterations": iterations, "kernels": kernels}
    return summary, texts


def differences(summary: dict[str, Any], texts: dict[str, str], folder: Path) -> list[str]:
    """What differs between a fresh run and the stored mca.json and <name>.mca.txt files."""
    stored_path = folder / "mca.json"
    if not stored_path.exists():
        return [f"{stored_path.relative_to(ROOT)} does not exist"]
    stored = json.loads(stored_path.read_text())
    out: list[str] = []
    for key in ("llvm_mca_version", "mcpu", "iterations"):
        if stored.get(key) != summary[key]:
            out.append(f"{key}: stored {stored.get(key)!r}, now {summary[key]!r}")
    old, new = stored.get("kernels", {}), summary["kernels"]
    for name in sorted(old.keys() - new.keys()):
        out.append(f"{name}: in mca.json but there is no {name}.s")
    for name in sorted(new.keys() - old.keys()):
        out.append(f"{name}: not in mca.json")
    for name in sorted(old.keys() & new.keys()):
        for field in sorted(old[name].keys() | new[name].keys()):
            if old[name].get(field) != new[name].get(field):
                out.append(f"{name}.{field}: stored {old[name].get(field)!r}, now {new[name].get(field)!r}")
    for name, text in texts.items():
        path = folder / f"{name}.mca.txt"
        if not path.exists() or path.read_text() != text:
            out.append(f"{path.relative_to(ROOT)} differs from llvm-mca's output")
    for path in stale(folder, texts):
        out.append(f"{path.relative_to(ROOT)} has no kernel")
    return out


def stale(folder: Path, texts: dict[str, str]) -> list[Path]:
    """Outputs left by a kernel that is gone."""
    return [p for p in sorted(folder.glob("*.mca.txt")) if p.name.removesuffix(".mca.txt") not in texts]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run llvm-mca on every kernel in ember/bench/kernels and store "
                                 "its outputs (<name>.mca.txt, mca.json).")
    ap.add_argument("--check", action="store_true",
                    help="re-run llvm-mca and compare with the stored outputs instead of writing them")
    ap.add_argument("--llvm-mca", metavar="PATH", help="the llvm-mca to run (default: llvm-mca or llvm-mca-14 on PATH)")
    args = ap.parse_args(argv)
    names = [args.llvm_mca] if args.llvm_mca else ["llvm-mca", "llvm-mca-14"]
    llvm_mca = next((found for found in map(shutil.which, names) if found), None)
    if llvm_mca is None:
        print(f"gen_mca.py: error: {' or '.join(names)} not found: install LLVM 14 (Debian/Ubuntu: "
              "`apt-get install llvm-14`) or pass --llvm-mca PATH", file=sys.stderr)
        return 2
    try:
        summary, texts = run_all(llvm_mca, KERNELS, ITERATIONS)
    except (McaError, OSError, subprocess.CalledProcessError) as e:
        print(f"gen_mca.py: error: {e}", file=sys.stderr)
        return 1
    if args.check:
        diff = differences(summary, texts, KERNELS)
        for line in diff:
            print(line)
        print(f"{len(texts)} kernels: " + (f"{len(diff)} differences" if diff else "match the stored outputs"))
        return 1 if diff else 0
    for path in stale(KERNELS, texts):
        path.unlink()
    for name, text in texts.items():
        (KERNELS / f"{name}.mca.txt").write_text(text)
    (KERNELS / "mca.json").write_text(json.dumps(summary, indent=2) + "\n")
    width = max(map(len, texts))
    for name, k in summary["kernels"].items():
        print(f"{name:<{width}}  {k['instructions_per_iteration']:4d} instructions  "
              f"{k['cycles_per_iteration']:8.3f} cycles/iteration  RThroughput {k['block_rthroughput']}")
    print(f"wrote {len(texts)} kernels' outputs and mca.json to {KERNELS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
