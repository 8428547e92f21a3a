"""ROBE, DHE and TT written in PyTorch, imported with and without their raising to emb ops: what it changes.

Each model (the test modules of tests/test_robe_import.py, tests/test_dhe_import.py and tests/test_tt_import.py)
is saved with torch.export, imported twice (once as ember-import does, once with the raisings turned off, so that
it stays host arithmetic, gathers and MatMuls), compiled at -O3 and simulated on both engines on the default
machine, 64 bags of 20 random indices below 10^7.  Prints cycles, host cycles, sol_fraction and the largest
difference from torch.  Needs torch.  Usage: python tools/raised_vs_host.py
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from conftest import compile_model  # noqa: E402
from test_dhe_import import DheBag  # noqa: E402
from test_fast_engine import assert_same, both  # noqa: E402
from test_quantized_import import save  # noqa: E402
from test_robe_import import RobeBag  # noqa: E402
from test_tt_import import TTBag  # noqa: E402

from ember.frontends.raising import kept_as_written  # noqa: E402


def main() -> None:
    feeds = {"indices": np.random.default_rng(1).integers(0, 10**7, size=(64, 20)).astype(np.int64)}
    with tempfile.TemporaryDirectory() as tmp:
        models = [("ROBE", RobeBag(4)), ("DHE", DheBag((8, 16, 16))),
                  ("TT", TTBag([200, 220, 250], [4, 4, 4], [16, 16]))]  # 11 million rows of 64
        for name, module in models:
            path = Path(tmp) / f"{name}.pt2"
            save(module, feeds, path)
            want = module(torch.from_numpy(feeds["indices"])).detach().numpy()
            for raised in (True, False):
                with nullcontext() if raised else kept_as_written():
                    program = compile_model(path, "O3")
                ref, stats, out, fast_stats = both(program, feeds)
                assert_same(stats, fast_stats)
                (key,) = ref
                print(f"{name} raised={raised}: cycles {stats['cycles']:,.0f}, host {stats['host.cycles']:,.0f}, "
                      f"sol_fraction {stats['sol_fraction']:.3g}, max |ember - torch| "
                      f"{float(np.abs(ref[key] - want).max()):.2g}")


if __name__ == "__main__":
    main()
