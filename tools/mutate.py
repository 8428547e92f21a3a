"""`make mutate`: mutmut over Ember's packages, each with its own tests, whole or sampled.

A full run of every package is about 20,000 mutants, several hours on two cores.  A random sample of
mutants estimates the same score in bounded time (mutant sampling: the sampled score is an unbiased
estimate of the full one, with a binomial confidence interval), so the default run samples; SAMPLE=all
runs every mutant.  The sample is the mutants whose names hash lowest under the seed (bottom-k
sampling): a second run draws the same mutants and tries again only those with no result or no kill
yet (mutmut keeps results until the mutated function changes), and a change to the code moves only the
mutants it adds or removes in or out of the sample, not the whole draw.

Each package runs in mutants/<package>/, with a mutmut configuration written from pyproject.toml's
[tool.mutmut]: only that package is mutated and only the test files listed for it under
[tool.mutmut.packages] run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = Path(sys.executable).with_name("mutmut")
LINKED = ("ember", "tests", "samples", "docs")  # docs: tests check that tables in docs/ are current

# mutmut's exit codes (mutmut/stats.py, 3.8.1) folded into the four outcomes this report counts.
KILLED = {1, 3, 36, -24, 24, 152, 255, -11, -9, -6}  # a failing test, a timeout or a crash (segfault, abort) detect it
TIMED_OUT = {36, -24, 24, 152, 255}  # the kills that were timeouts, reported apart: a busy machine can cause them
SURVIVED = {0}
NO_TESTS = {5, 33}

# Generate mutants without running them: the first steps of mutmut's own `run`, so that the sample can
# be drawn from every mutant's name before any is tried.
GENERATE = """
import os
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants, setup_source_paths
from mutmut.configuration import config
from mutmut.mutation.trampoline import set_mutant_under_test
config()
set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
copy_src_dir()
copy_also_copy_files()
setup_source_paths()
create_mutants(1)
"""


@dataclass
class Tally:
    package: str
    total: int  # every mutant of the package
    tried: list[str]  # the mutants this report counts (the sample, or all)
    outcome: dict[str, int | None]

    def count(self, codes: set[int]) -> int:
        return sum(1 for m in self.tried if self.outcome.get(m) in codes)

    @property
    def killed(self) -> int:
        return self.count(KILLED)

    @property
    def checked(self) -> int:
        return sum(1 for m in self.tried if self.outcome.get(m) is not None)


def write_config(package: str, workdir: Path) -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    packages = cfg.pop("packages")
    if package not in packages:
        sys.exit(f"make mutate: unknown PKG '{package}' (one of: {' '.join(packages)})")
    cfg |= {"only_mutate": [f"ember/{package}/*"], "pytest_add_cli_args_test_selection": packages[package]}
    workdir.mkdir(parents=True, exist_ok=True)
    lines = ["[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in cfg.items()]
    (workdir / "pyproject.toml").write_text("\n".join(lines) + "\n")
    for name in LINKED:
        link = workdir / name
        if not link.is_symlink():
            link.symlink_to(Path("..", "..", name))


def sync_data_files(copy: Path) -> None:
    """mutmut copies the package once and then refreshes only its Python files: bring the rest (the fast
    engine's runtime.h, grammars, machine presets) up to date, or the copy mixes old C with new Python."""
    source = ROOT / "ember"
    for f in source.rglob("*"):
        if f.is_file() and f.suffix not in (".py", ".pyc"):
            dst = copy / f.relative_to(source)
            if not dst.exists() or dst.read_bytes() != f.read_bytes():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dst)


def outcomes(workdir: Path, package: str) -> dict[str, int | None]:
    """Every mutant of the package and its exit code (None: not tried yet), from mutmut's .meta files."""
    found: dict[str, int | None] = {}
    for meta in sorted((workdir / "mutants" / "ember" / package).rglob("*.py.meta")):
        found.update(json.loads(meta.read_text())["exit_code_by_key"])
    return found


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a proportion (Wilson score): sound near 0 and 1, where the normal one is not."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mutate(package: str, sample: int | None, seed: int, jobs: int, pattern: str | None) -> Tally:
    workdir = ROOT / "mutants" / package
    write_config(package, workdir)
    subprocess.run([sys.executable, "-c", GENERATE], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    sync_data_files(workdir / "mutants" / "ember")
    every = outcomes(workdir, package)
    names = sorted(every)
    if pattern:
        from fnmatch import fnmatch

        names = [n for n in names if fnmatch(n, pattern)]
    if sample is not None and sample < len(names):
        names = sorted(sorted(names, key=lambda n: hashlib.sha256(f"{seed}:{n}".encode()).digest())[:sample])
    # Survivors are tried again too: a test added since the last run may kill them.
    todo = [n for n in names if every[n] is None or every[n] in SURVIVED | NO_TESTS]
    print(f"== mutate {package}: {len(names)} of {len(every)} mutants, {len(todo)} to try", flush=True)
    for _ in range(2):  # mutmut forgets every result when the package's test list changed: then once more
        if not todo:
            break
        cmd = ["nice", "-n", "19", str(MUTMUT), "run", "--max-children", str(jobs), *todo]
        run = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stdout[-3000:] + run.stderr[-3000:])
            print(f"make mutate: mutmut failed on {package} (exit {run.returncode}); its tally counts what it tried",
                  file=sys.stderr)
            break
        now = outcomes(workdir, package)
        todo = [n for n in names if now.get(n) is None]
    tally = Tally(package, len(every), names, outcomes(workdir, package))
    report = workdir / "results.txt"
    report.write_text("".join(f"{n}: {describe(tally.outcome[n])}\n" for n in names))
    return tally


def describe(code: int | None) -> str:
    if code is None:
        return "not checked"
    if code in TIMED_OUT:
        return "killed (timeout)"
    if code in KILLED:
        return "killed"
    if code in SURVIVED:
        return "survived"
    if code in NO_TESTS:
        return "no tests"
    return f"exit {code}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+")
    parser.add_argument("--sample", default="200", help="mutants drawn per package, or 'all'")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--mutants", default="", help="only mutants whose name matches this pattern")
    args = parser.parse_args()
    sample = None if args.sample == "all" else int(args.sample)
    os.environ.setdefault("EMBER_CACHE_DIR", str(ROOT / "mutants" / "cache"))
    start = time.monotonic()
    tallies = [mutate(p, sample, args.seed, args.jobs, args.mutants or None) for p in args.packages]
    print(f"{'package':10} {'mutants':>8} {'tried':>6} {'killed':>7} {'timeouts':>9} {'survived':>9} {'no tests':>9} "
          f"{'score':>7}  95% interval")
    for t in tallies:
        lo, hi = wilson(t.killed, t.checked)
        score = t.killed / t.checked if t.checked else 0.0
        print(f"{t.package:10} {t.total:8} {t.checked:6} {t.killed:7} {t.count(TIMED_OUT):9} {t.count(SURVIVED):9} "
              f"{t.count(NO_TESTS):9} {score:7.1%}  {lo:.1%}-{hi:.1%}")
    if len(tallies) > 1:
        # Each package's score weighted by its share of all mutants: the estimate of the score a full
        # run would give, with the variance of a stratified sample.
        total = sum(t.total for t in tallies)
        est = var = 0.0
        for t in tallies:
            if t.checked:
                w, p = t.total / total, t.killed / t.checked
                est += w * p
                var += w * w * p * (1 - p) / t.checked * (1 - t.checked / t.total)
        half = 1.96 * math.sqrt(var)
        print(f"{'all':10} {total:8} {sum(t.checked for t in tallies):6} {'':7} {'':9} {'':9} {'':9} "
              f"{est:7.1%}  {max(0, est - half):.1%}-{min(1, est + half):.1%}")
    print(f"in {time.monotonic() - start:.0f} s; survivors: mutants/<package>/results.txt")


if __name__ == "__main__":
    main()
