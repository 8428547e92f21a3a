"""PyTorch's row-wise quantized embedding bags imported from `.pt` and `.pt2` archives as emb.qbag.

Each module holds a table prepacked by torch (a uint8 buffer in FBGEMM's layout) and calls
`quantized::embedding_bag_{byte,4bit}_rowwise_offsets`; its own output is the reference, bit for bit, on both
engines at -O0 and -O3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compile_model, run_tool
from test_fast_engine import assert_same, both

from ember.frontends import import_model, load_weights_any
from ember.ir.printer import print_module

torch = pytest.importorskip("torch")

ROWS, DIM, LOOKUPS = 30, 24, 23
OFFSETS = [0, 5, 5, 12]  # four bags without the final offset, the second empty


class Bag(torch.nn.Module):
    """A quantized bag over a prepacked table (a buffer, as a quantized EmbeddingBag keeps its rows)."""

    def __init__(self, bits: int, last: bool, pruned: bool = False) -> None:
        super().__init__()
        rows = torch.from_numpy(np.random.default_rng(bits).standard_normal((ROWS, DIM)).astype(np.float32))
        ops = torch.ops.quantized
        self.register_buffer("table", ops.embedding_bag_byte_prepack(rows) if bits == 8 else
                             ops.embedding_bag_4bit_prepack(rows))
        self.op = ops.embedding_bag_byte_rowwise_offsets if bits == 8 else ops.embedding_bag_4bit_rowwise_offsets
        self.last, self.pruned = last, pruned
        self.mapping = torch.arange(ROWS, dtype=torch.int32) if pruned else None

    def bag(self, indices: Any, offsets: Any, weights: Any) -> Any:
        return self.op(self.table, indices, offsets, False, 0, self.pruned, weights, self.mapping, self.last)

    def forward(self, indices: Any, offsets: Any) -> Any:
        return self.bag(indices, offsets, None)


class WeightedBag(Bag):
    def forward(self, indices: Any, offsets: Any, weights: Any) -> Any:
        return self.bag(indices, offsets, weights)


def feeds(weighted: bool, last: bool, two_d: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    if two_d:  # five bags of four, no offsets
        out = {"indices": rng.integers(0, ROWS, size=(5, 4)).astype(np.int64)}
        if weighted:
            out["weights"] = rng.standard_normal((5, 4)).astype(np.float32)
        return out
    out = {"indices": rng.integers(0, ROWS, size=LOOKUPS).astype(np.int64),
           "offsets": np.array(OFFSETS + [LOOKUPS] if last else OFFSETS, np.int64)}
    if weighted:
        out["weights"] = rng.standard_normal(LOOKUPS).astype(np.float32)
    return out


def save(module: Any, args: dict[str, np.ndarray], path: Path) -> Path:
    tensors = tuple(torch.from_numpy(v) for v in args.values())
    if path.suffix == ".onnx":  # NAME.ts.onnx: TorchScript's exporter; any other NAME.onnx: torch.export's
        torch.onnx.export(module, tensors, str(path), dynamo=not path.name.endswith(".ts.onnx"),
                          input_names=list(args), external_data=False)
    elif path.suffix == ".pt2":
        torch.export.save(torch.export.export(module, tensors), str(path))
    else:
        torch.jit.save(torch.jit.trace(module, tensors), str(path))
    return path


def simulate(path: Path, level: str, args: dict[str, np.ndarray]) -> np.ndarray:
    ref_out, ref_st, out, st = both(compile_model(path, level), args)
    (name,) = ref_out
    np.testing.assert_array_equal(out[name].view(np.uint32), ref_out[name].view(np.uint32))
    assert_same(ref_st, st)
    return ref_out[name]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[Any, ...], tuple[Path | str, np.ndarray]]:
    """Each archive once (the levels share it), with the module's own output; instead of the path, why torch
    could not write it."""
    made: dict[tuple[Any, ...], tuple[Path | str, np.ndarray]] = {}
    root = tmp_path_factory.mktemp("qbags")
    for bits in (8, 4):
        for weighted in (False, True):
            for last in (False, True):
                module = (WeightedBag if weighted else Bag)(bits, last)
                args = feeds(weighted, last)
                want = module(*(torch.from_numpy(v) for v in args.values())).numpy()
                for suffix in (".pt", ".pt2"):
                    name = f"b{bits}{'w' if weighted else ''}{'l' if last else ''}{suffix}"
                    try:
                        made[bits, weighted, last, suffix] = save(module, args, root / name), want
                    except RuntimeError as e:
                        if (bits, last, suffix) != (4, True, ".pt2"):
                            raise
                        # torch has no fake (shape-only) kernel of the 4-bit operator: torch.export runs the real
                        # one on zero-filled inputs, whose offsets it rejects when they include the last one
                        made[bits, weighted, last, suffix] = f"torch.export fails: {str(e).splitlines()[0]}", want
    return made


@pytest.mark.parametrize("level", ["O0", "O3"])
@pytest.mark.parametrize("suffix", [".pt", ".pt2"])
@pytest.mark.parametrize("last", [False, True], ids=["offsets", "last_offset"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_bag_imports_and_equals_torch(archives: dict, bits: int, weighted: bool, last: bool, suffix: str,
                                                level: str) -> None:
    path, want = archives[bits, weighted, last, suffix]
    if isinstance(path, str):
        pytest.skip(path)
    module = import_model(str(path), str(path))
    text = print_module(module)
    assert text.count("emb.qbag") == 1 and f"bits = {bits}, mode = \"sum\"" in text
    assert "emb.bag" not in text
    table = load_weights_any(str(path))["table"]
    assert table.dtype == np.uint8 and table.shape == (ROWS, DIM + 8 if bits == 8 else DIM // 2 + 4)
    got = simulate(path, level, feeds(weighted, last))
    assert got.shape == want.shape == (len(OFFSETS), DIM)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(("suffix", "bits", "last"), [(".pt", 4, False), (".pt2", 4, False), (".pt", 8, False),
                                                      (".pt", 8, True)])
def test_two_dimensional_indices_are_bags_of_one_length(tmp_path: Path, suffix: str, bits: int, last: bool) -> None:
    """Without offsets each row of 2-D indices is a bag; with include_last_offset the 8-bit operator takes the row
    starts as offsets including the last one, so the final row is no bag (the 4-bit one refuses that case).
    torch.export cannot export the 8-bit operator without offsets: its shape function insists on them."""
    module = WeightedBag(bits, last)
    args = feeds(True, last, two_d=True)

    class NoOffsets(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, indices: Any, weights: Any) -> Any:
            return self.inner.bag(indices, None, weights)

    wrapper = NoOffsets()
    want = wrapper(*(torch.from_numpy(v) for v in args.values())).numpy()
    assert want.shape == (4 if last else 5, DIM)
    got = simulate(save(wrapper, args, tmp_path / f"fixed{suffix}"), "O3", args)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_scripted_quantized_bag_imports_through_torch(tmp_path: Path) -> None:
    """A torch.jit.script archive has no recorded inputs: ember-import exports it with torch to a .pt2, which
    then compiles to the scripted module's own output."""
    class Scripted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", Bag(8, True).table)

        def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
            return torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
                self.table, indices, offsets, per_sample_weights=weights, include_last_offset=True)

    module = Scripted()
    args = feeds(True, True)
    want = module(*(torch.from_numpy(v) for v in args.values())).numpy()
    scripted = tmp_path / "bag.pt"
    torch.jit.save(torch.jit.script(module), str(scripted))
    np.savez(tmp_path / "in.npz", **args)
    done = run_tool("import", str(scripted), "-o", str(tmp_path / "bag.eir"), "--example-inputs",
                    str(tmp_path / "in.npz"), "--export-to", str(tmp_path / "bag.pt2"))
    assert done.returncode == 0, done.stderr.decode()
    assert "emb.qbag" in (tmp_path / "bag.eir").read_text()
    got = simulate(tmp_path / "bag.pt2", "O3", args)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("suffix", [".pt", ".pt2"])
def test_pruned_table_is_refused_in_one_line(tmp_path: Path, suffix: str) -> None:
    module = Bag(8, False, pruned=True)
    path = save(module, feeds(False, False), tmp_path / f"pruned{suffix}")
    done = run_tool("import", str(path), "-o", str(tmp_path / "out.eir"))
    err = done.stderr.decode()
    assert done.returncode == 1
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(f"ember-import: {path}: error: ") and "pruned_weights=True" in err
    assert "embedding_bag_byte_rowwise_offsets" in err  # names the call (.pt) or the node (.pt2)
    assert not (tmp_path / "out.eir").exists()


def test_byte_tensors_promote_as_pytorch_does(tmp_path: Path) -> None:
    """uint8 tensors are ordinary inputs too: with int8 they promote to int16, with a Python number they stay
    uint8 (wrapping), as PyTorch computes."""

    class Mixed(torch.nn.Module):
        def forward(self, a: Any, b: Any) -> Any:
            return a + b, a * 3

    args = {"a": np.array([0, 7, 200, 255], np.uint8), "b": np.array([-128, 5, 100, 127], np.int8)}
    want = Mixed()(*(torch.from_numpy(v) for v in args.values()))
    path = save(Mixed(), args, tmp_path / "mixed.pt2")
    ref_out, _, out, _ = both(compile_model(path, "O0"), args)
    for name, w in zip(("output0", "output1"), want):
        assert ref_out[name].dtype == out[name].dtype == w.numpy().dtype
        np.testing.assert_array_equal(ref_out[name], w.numpy())
        np.testing.assert_array_equal(out[name], w.numpy())
