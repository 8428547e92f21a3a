"""Scripted TorchScript archives (torch.jit.script): read with torch when it is installed.

The torch-free reader refuses them with `NeedsTorch`, whatever is installed; `ember-import` then
converts them with torch.export to a `.pt2` beside the output.  Without torch that is a one-line error
naming the extra to install.  The tests that need torch skip cleanly without it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, compile_model, run_tool

from ember.frontends import NeedsTorch, import_model
from ember.frontends.pt2 import import_pt2
from ember.ir.diagnostics import EmberError
from ember.ir.printer import print_module
from ember.machine import load_machine
from ember.sim.reference import simulate

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.script and trace are deprecated
SCRIPTED = ["embedding", "bag_mean", "bag_weighted", "mp_mean", "spmm", "kg_transe", "spattn", "bag_gated"]


def _need(path: Path) -> NeedsTorch:
    with pytest.raises(NeedsTorch) as err:
        import_model(str(path), "w")
    return err.value


@pytest.mark.parametrize("name", SCRIPTED)
def test_scripted_archives_need_torch(name: str) -> None:
    """The torch-free reader names why (no recorded input shapes) and what to install."""
    need = _need(MODELS / f"{name}.scripted.pt")
    assert "scripted module" in need.reason and need.inputs is None
    assert "pip install 'ember[torch]'" in str(need) and str(MODELS / f"{name}.scripted.pt") in str(need)


def test_without_torch_ember_import_says_what_to_install(tmp_path: Path) -> None:
    shim = tmp_path / "shim" / "torch"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    out = tmp_path / "m.eir"
    r = run_tool("import", str(MODELS / "bag_gated.scripted.pt"), "-o", str(out), "--example-inputs",
                 str(MODELS / "bag_gated.in.npz"), path=[tmp_path / "shim"])
    err = r.stderr.decode()
    assert r.returncode == 1 and len(err.strip().splitlines()) == 1
    assert "scripted module" in err and "not installed: pip install 'ember[torch]'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shim"]  # no .eir, no .pt2, no temporary file


def test_export_to_must_be_a_pt2(tmp_path: Path) -> None:
    r = run_tool("import", str(MODELS / "bag_gated.scripted.pt"), "--export-to", str(tmp_path / "m.onnx"))
    assert r.returncode == 1 and b"--export-to must name a .pt2 file" in r.stderr
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------
# With torch


@pytest.fixture(scope="module")
def torch() -> object:
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def exported(torch: object, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every scripted sample converted once, as ember-import does."""
    from ember.frontends.scripted import export_scripted

    out = tmp_path_factory.mktemp("scripted")
    paths = {}
    for name in SCRIPTED:
        paths[name] = out / f"{name}.scripted.pt2"
        feeds = dict(np.load(MODELS / f"{name}.in.npz"))
        export_scripted(str(MODELS / f"{name}.scripted.pt"), _need(MODELS / f"{name}.scripted.pt"), feeds,
                        str(paths[name]))
    return paths


@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3", "core"])
@pytest.mark.parametrize("name", SCRIPTED)
def test_scripted_archive_simulates_to_pytorch_outputs(exported: dict[str, Path], name: str, level: str) -> None:
    feeds = dict(np.load(MODELS / f"{name}.in.npz"))
    want = np.load(MODELS / f"{name}.torch.out.npz")
    got, _ = simulate(compile_model(exported[name], level), feeds, load_machine("default"))
    for k in want.files:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=f"{name} at {level}: {k}")


@pytest.mark.parametrize("name", ["embedding", "bag_mean", "bag_weighted", "mp_mean", "spmm", "kg_transe"])
def test_scripted_and_exported_archives_import_alike(exported: dict[str, Path], name: str) -> None:
    """Control flow taken, the scripted module is the traced one (its parameters sit under `scripted.`)."""
    mine = print_module(import_pt2(str(exported[name]), "w")).replace("scripted.", "")
    assert mine == print_module(import_pt2(str(MODELS / f"{name}.pt2"), "w"))


def test_ember_import_converts_beside_the_output(torch: object, tmp_path: Path) -> None:
    """The whole chain: the .eir names the .pt2 it wrote, and asm and sim need nothing else."""
    eir = tmp_path / "out" / "gated.eir"
    eir.parent.mkdir()
    r = run_tool("import", str(MODELS / "bag_gated.scripted.pt"), "-o", str(eir), "--example-inputs",
                 str(MODELS / "bag_gated.in.npz"))
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(p.name for p in eir.parent.iterdir()) == ["gated.eir", "gated.scripted.pt2"]
    assert 'weights = "gated.scripted.pt2"' in eir.read_text() and 'inputs = ["indices", "offsets"]' in eir.read_text()
    dae, binary = tmp_path / "g.dae", tmp_path / "g.bin"
    assert run_tool("opt", "-O3", str(eir), "-o", str(dae)).returncode == 0
    assert run_tool("asm", str(dae), "-o", str(binary)).returncode == 0
    r = run_tool("sim", str(binary), "--inputs", str(MODELS / "bag_gated.in.npz"), "--check",
                 str(MODELS / "bag_gated.torch.out.npz"))
    assert r.returncode == 0 and b"outputs match" in r.stderr
    r = run_tool("import", str(MODELS / "bag_gated.scripted.pt"), "-o", str(tmp_path / "x.eir"))
    assert r.returncode == 1 and b"pass --example-inputs IN.npz" in r.stderr and b"(indices, offsets)" in r.stderr


def _save(torch: object, module: object, path: Path, *args: object, trace: bool = False) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = torch.jit.trace(module, args) if trace else torch.jit.script(module)  # type: ignore[attr-defined]
        torch.jit.save(saved, str(path))  # type: ignore[attr-defined]


def test_branch_on_tensor_values_is_refused(torch: object, tmp_path: Path) -> None:
    """export decides branches on shapes, never on values; a value branch is an error, not a guess."""
    from ember.frontends.scripted import export_scripted

    class ValueBranch(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if bool(x.sum() > 0):
                return x * 2
            return x - 1

    path = tmp_path / "branch.pt"
    _save(torch, ValueBranch(), path)
    with pytest.raises(EmberError, match="torch.export cannot trace the scripted module.*data-dependent") as err:
        export_scripted(str(path), _need(path), {"x": np.ones((3, 2), np.float32)}, str(tmp_path / "b.pt2"))
    assert "\n" not in str(err.value) and not (tmp_path / "b.pt2").exists()
    with pytest.raises(EmberError, match=r"do not match forward\(x\): forward has no parameter y"):
        export_scripted(str(path), _need(path), {"y": np.ones(2, np.float32)}, str(tmp_path / "b.pt2"))


def test_traced_module_calling_scripted_code(torch: object, tmp_path: Path) -> None:
    """A trace that calls a scripted function keeps its loop: read with torch, on the traced shapes."""
    from ember.frontends.scripted import export_scripted

    @torch.jit.script
    def squash(y: torch.Tensor, n: int) -> torch.Tensor:
        for _ in range(n):
            y = torch.tanh(y) * 2.0
        return y

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            return squash(self.emb(idx), 3)

    model = Model()
    idx = torch.tensor([[1, 2], [3, 9], [0, 0]])
    path = tmp_path / "mixed.pt"
    _save(torch, model, path, idx, trace=True)
    need = _need(path)
    assert "'for' statements" in need.reason and need.inputs == {"idx": ((3, 2), "int64")}
    export_scripted(str(path), need, None, str(tmp_path / "mixed.pt2"))  # zeros of the traced shapes
    module = import_pt2(str(tmp_path / "mixed.pt2"), "w")
    assert sum(op.name == "emb.gather" for op in module.walk()) == 1
    got, _ = simulate(compile_model(tmp_path / "mixed.pt2", "O3"), {"idx": idx.numpy()}, load_machine("default"))
    with torch.no_grad():
        want = model(idx).numpy()
    np.testing.assert_allclose(got["output"], want, rtol=1e-5, atol=1e-6)
