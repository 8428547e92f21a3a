"""Save a few of ``aten_models.py``'s models as ``.pt`` and ``.pt2`` archives under ``samples/aten`` (run once;
the outputs are committed, so the tests cover these operators without torch).

Needs torch==2.13.0 (CPU).  For each name in ``COMMITTED`` it writes ``<name>.pt`` (torch.jit.trace +
save), ``<name>.pt2`` (torch.export + save), ``<name>.in.npz`` (the inputs, named as Ember names them)
and ``<name>.torch.out.npz`` (PyTorch's eager output, ``output``), after checking that both archives,
loaded back with torch, give that output too.  The other models are built by the tests themselves
when torch is installed.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aten_models import as_torch, dlrm_cases, eager, embedding_cases, flat, op_cases, save  # noqa: E402

OUT = Path(__file__).resolve().parent / "aten"
COMMITTED = ("emb_max_norm", "bag_mean_max_norm", "bag_sum_2d", "bag_weighted_2d", "take", "dlrm_tril",
             "dlrm_lists_weighted", "shapes", "attention")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    cases = {**embedding_cases(), **dlrm_cases(), **op_cases()}
    for name in COMMITTED:
        case = cases[name]()
        want = eager(case)
        save(case, OUT / name)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            for kind, model in (("traced", torch.jit.load(str(OUT / f"{name}.pt"))),
                                ("exported", torch.export.load(str(OUT / f"{name}.pt2")).module())):
                got = model(*as_torch(case.feeds)).numpy()
                if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                    raise SystemExit(f"{name}: the {kind} archive differs from eager PyTorch")
        np.savez(OUT / f"{name}.in.npz", **flat(case.feeds))
        np.savez(OUT / f"{name}.torch.out.npz", output=want)
        print(f"wrote {name}.pt, {name}.pt2, {name}.in.npz, {name}.torch.out.npz")


if __name__ == "__main__":
    main()
