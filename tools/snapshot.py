"""A snapshot of what a refactor of the compiler or the simulator must not change, to diff before and after.

For every workload of the chosen suites (timing only) and every variant, and for every file of the corpus at -O0
and -O3: the compiler's program as `.dae` text (its sha256) and every statistic of the run on the fast engine
(host-time figures aside).  The corpus is also run on the reference engine, whose statistics must be the fast
engine's.  Two snapshots are compared with `--diff A.json B.json`, which prints each point and statistic that
differs and exits 1 if any does.

    python tools/snapshot.py --suites tiny,quick,paper --corpus -o before.json
    python tools/snapshot.py --diff before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HOST_TIME = ("host_seconds", "lookups_per_host_second", "sim_cycles_per_host_second")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def suites(names: list[str], variants: list[str]) -> dict[str, dict]:
    from ember.backend.dae_text import print_dae
    from ember.bench.run import compile_variant, run
    from ember.bench.workloads import suite
    from ember.machine import load_machine

    machine = load_machine("default")
    points: dict[str, dict] = {}
    for scale in names:
        for w in suite(scale):
            for v in variants:
                key = f"{scale}/{w.name}/{v}"
                try:
                    code = _digest(print_dae(compile_variant(w, v))) if v != "hand" else ""
                    stats = run(w, v, machine, engine="fast", timing_only=True).stats
                except Exception as e:  # noqa: BLE001 - a point that fails is recorded, not fatal
                    points[key] = {"error": str(e)}
                    continue
                points[key] = {"dae": code, "stats": {k: s for k, s in stats.items() if k not in HOST_TIME}}
                print(key, stats["cycles"], flush=True)
    return points


def corpus() -> dict[str, dict]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import compile_model

    from ember.backend.dae_text import print_dae
    from ember.machine import load_machine
    from ember.sim.engines import simulate

    folder = ROOT / "samples" / "corpus"
    manifest = json.loads((folder / "manifest.json").read_text())
    machine = load_machine("default")
    points: dict[str, dict] = {}
    for e in manifest["exports"]:
        if not e["file"]:
            continue
        inputs = dict(np.load(folder / e["inputs"]))
        for level in ("O0", "O3"):
            key = f"corpus/{e['file']}/{level}"
            try:
                program = compile_model(folder / e["file"], level)
                runs = {eng: simulate(program, inputs, machine, engine=eng) for eng in ("reference", "fast")}
            except Exception as ex:  # noqa: BLE001
                points[key] = {"error": str(ex)}
                continue
            program.weights = Path(program.weights).name  # the checkout's path is not the program
            point: dict = {"dae": _digest(print_dae(program))}
            for eng, (outs, st) in runs.items():
                point[eng] = {k: v for k, v in st.to_dict().items() if k not in HOST_TIME}
                point[f"{eng}.outputs"] = {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]
                                           for k, v in outs.items()}
            points[key] = point
            print(key, point["fast"]["cycles"], flush=True)
    return points


def diff(a_path: str, b_path: str) -> int:
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    bad = 0
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            print(f"{key}: only in {'the first' if key in a else 'the second'}")
            bad += 1
            continue
        for field in sorted(set(a[key]) | set(b[key])):
            x, y = a[key].get(field), b[key].get(field)
            if isinstance(x, dict) and isinstance(y, dict):
                for k in sorted(set(x) | set(y)):
                    if x.get(k) != y.get(k):
                        print(f"{key} {field}.{k}: {x.get(k)!r} -> {y.get(k)!r}")
                        bad += 1
            elif x != y:
                print(f"{key} {field}: {x!r} -> {y!r}")
                bad += 1
    for key, point in b.items():  # within one snapshot, the engines agree on the corpus
        if "reference" in point and point["reference"] != point["fast"]:
            print(f"{key}: the engines disagree")
            bad += 1
    print(f"{len(set(a) | set(b))} points, {bad} differences")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", default="", help="comma-separated suites, run timing only")
    ap.add_argument("--variants", default="O0,O1,O2,paper-O3,O3,hand,core")
    ap.add_argument("--corpus", action="store_true", help="every corpus file at -O0 and -O3, on both engines")
    ap.add_argument("-o", "--output", help="the snapshot to write (JSON)")
    ap.add_argument("--diff", nargs=2, metavar="JSON", help="compare two snapshots")
    args = ap.parse_args()
    if args.diff:
        return diff(*args.diff)
    out = Path(args.output)
    points = suites([s for s in args.suites.split(",") if s], args.variants.split(","))
    out.write_text(json.dumps(points, indent=1, sort_keys=True))
    if args.corpus:
        points.update(corpus())
        out.write_text(json.dumps(points, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
