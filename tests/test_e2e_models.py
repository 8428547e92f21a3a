"""End-to-end models through every tool (import, opt -O3, asm, sim), outputs against onnxruntime's.

The committed samples cover the classes of issue 14 at toy sizes: DLRM (`dlrm`), a GCN layer (`gcn`),
knowledge-graph scoring (`kg_transe`) and block-sparse attention (`spattn`).  The DLRM with MLPerf's
published shapes (Criteo Terabyte: 26 tables of D = 128, bottom MLP 13-512-256-128, top MLP
479-1024-1024-512-256-1 after the dot interaction) is exported here with torch, tables capped at 100
rows so the export stays small: 9 MB of MLP weights is too much to commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, run_tool

ROOT = Path(__file__).resolve().parent.parent


def through_the_tools(tmp: Path, model: Path, inputs: Path, want: dict[str, np.ndarray]) -> dict[str, float]:
    """import -> opt -O3 -> asm -> sim on the fast engine; outputs checked here against `want`."""
    steps = [("import", str(model), "-o", str(tmp / "m.eir")),
             ("opt", "-O3", str(tmp / "m.eir"), "-o", str(tmp / "m.dae")),
             ("asm", str(tmp / "m.dae"), "-o", str(tmp / "m.bin")),
             ("sim", str(tmp / "m.bin"), "--inputs", str(inputs), "--outputs", str(tmp / "out.npz"),
              "--stats", str(tmp / "st.json"))]
    for name, *args in steps:
        res = run_tool(name, *args)
        assert res.returncode == 0, (name, res.stderr.decode())
    got = np.load(tmp / "out.npz")
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)
    return json.loads((tmp / "st.json").read_text())


@pytest.mark.parametrize("model", ["dlrm.dynamo", "gcn.dynamo", "kg_transe.dynamo", "spattn.dynamo"])
def test_each_model_class_runs_through_every_tool(tmp_path: Path, model: str) -> None:
    want = dict(np.load(MODELS / f"{model}.out.npz"))  # onnxruntime's outputs, saved by samples/gen_models.py
    st = through_the_tools(tmp_path, MODELS / f"{model}.onnx", MODELS / f"{model.split('.')[0]}.in.npz", want)
    # every run reports its energy (choose-plan may keep a toy model's gathers on the core: spattn's at -O3)
    assert st["energy_j"] > 0 and st["cycles"] > 0


@pytest.mark.slow
def test_dlrm_with_mlperf_shapes_runs_through_every_tool(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(ROOT / "samples"))
    import zoo

    tables, dim, batch, rows = 26, 128, 4, 100
    rng = np.random.default_rng(0)
    top = [dim + tables * (tables + 1) // 2, 1024, 1024, 512, 256, 1]
    assert top[0] == 479  # MLPerf's top MLP input: the dense vector and the 351 pairwise dots
    net = zoo.DLRMNet(dim, [rows] * tables, [13, 512, 256, 128], top, rng).eval()
    feeds = {"dense_x": rng.standard_normal((batch, 13)).astype(np.float32),
             "offsets": np.tile(np.arange(batch, dtype=np.int64), (tables, 1)),  # one-hot, as MLPerf's Criteo TB
             "indices": rng.integers(0, rows, size=(tables, batch)).astype(np.int64)}
    path = tmp_path / "dlrm_mlperf.onnx"
    torch.onnx.export(net, tuple(torch.from_numpy(v) for v in feeds.values()), str(path), dynamo=True,
                      input_names=list(feeds), output_names=["p"], external_data=False)
    np.savez(tmp_path / "in.npz", **feeds)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    st = through_the_tools(tmp_path, path, tmp_path / "in.npz", {"p": want})
    assert st["lookups"] == tables * batch
    eir = (tmp_path / "m.eir").read_text()
    assert eir.count("emb.bag") == tables
    assert st["host.cycles"] > 0.5 * st["cycles"]  # the MLPs, not the lookups, take most of the time
