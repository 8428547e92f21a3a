"""The aten operators of the torch frontends (ember/frontends/aten/) against PyTorch.

The committed archives (samples/aten, from samples/gen_aten_cases.py) need no torch: each imports from
`.pt` and from `.pt2` to the same program, compiles at -O0 and -O3 and simulates to PyTorch's eager
output (rtol 1e-4, atol 1e-5).  With torch installed, every case of samples/gen_aten_cases.py (models
of samples/zoo.py) is traced and exported here and checked the same way: the embedding and
EmbeddingBag variants, DLRM as the reference implementation writes it, the dense-operator models and,
with transformers (the `corpus` extra), the corpus's tiny BERT, GPT-2 and DistilBERT with eager and
SDPA attention.  docs/operators.md must be what tests/gen_operators_doc.py writes from the operator
table.
"""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, compile_model
from gen_operators_doc import DOC, render

import ember.dialects  # noqa: F401
from ember.frontends import import_model, load_weights_any
from ember.ir.core import Op, Value
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.reference import simulate

ATEN = ROOT / "samples" / "aten"
COMMITTED = sorted(p.stem for p in ATEN.glob("*.pt"))
SUFFIXES = (".pt", ".pt2")
LEVELS = ("O0", "O3")
RTOL, ATOL = 1e-4, 1e-5
MAX_NORM = {"emb_max_norm": 1.0, "bag_mean_max_norm": 1.5}  # samples/gen_aten_cases.py


def run(path: Path, level: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    got, _ = simulate(compile_model(path, level), feeds, load_machine("default"))
    return got["output"]


def structure(module: Op) -> list[tuple[Any, ...]]:
    """The program without the names of its values and weights: what two archives of one model share
    (a constant of the trace is `CONSTANTS.c0` in one and `lifted_tensor_0` in the other)."""
    ids: dict[Value, int] = {}
    out = []
    for op in module.walk():
        for r in [*op.results, *(a for b in op.regions for a in b.args)]:
            ids[r] = len(ids)
        attrs = {k: v for k, v in op.attrs.items() if not (op.name == "param" and k == "name")}
        out.append((op.name, tuple(ids[v] for v in op.operands), repr(sorted(attrs.items(), key=str)),
                    tuple(str(r.type) for r in op.results)))
    return out


def ops(module: Op) -> list[Op]:
    return list(module.walk())


def op_types(module: Op) -> list[str]:
    return [op.attrs["op"] if op.name == "host.onnx" else op.name for op in module.walk()]


# ---------------------------------------------------------------------------------------------
# Committed archives (no torch needed)


def test_the_committed_archives_are_there() -> None:
    assert len(COMMITTED) >= 9 and all((ATEN / f"{n}.pt2").is_file() for n in COMMITTED)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", COMMITTED)
def test_committed_archive_simulates_to_pytorch(name: str, suffix: str, level: str) -> None:
    feeds = dict(np.load(ATEN / f"{name}.in.npz"))
    want = np.load(ATEN / f"{name}.torch.out.npz")["output"]
    got = run(ATEN / f"{name}{suffix}", level, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}{suffix} at -{level}")


@pytest.mark.parametrize("name", COMMITTED)
def test_both_archives_import_to_one_program(name: str) -> None:
    traced, exported = (import_model(str(ATEN / f"{name}{s}"), "w") for s in SUFFIXES)
    assert traced.attrs["inputs"] == exported.attrs["inputs"] == list(np.load(ATEN / f"{name}.in.npz").files)
    assert structure(traced) == structure(exported)


def _renormed(table: np.ndarray, rows: np.ndarray, max_norm: float) -> np.ndarray:
    """PyTorch's embedding_renorm_, in numpy: each row looked up whose 2-norm exceeds max_norm is scaled
    by max_norm / (norm + 1e-7), once, in a copy of the table."""
    out = table.astype(np.float64)
    for r in np.unique(rows):
        norm = np.linalg.norm(out[r])
        if norm > max_norm:
            out[r] *= max_norm / (norm + 1e-7)
    return out


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", sorted(MAX_NORM))
def test_max_norm_renormalises_the_rows_looked_up_in_the_table(name: str, suffix: str) -> None:
    """The archives hold rows above max_norm (they were traced on other indices); the inputs look some
    of them up.  The lookup must read the table after renormalisation, as PyTorch does."""
    path = ATEN / f"{name}{suffix}"
    module = import_model(str(path), "w")
    (lookup,) = [op for op in ops(module) if op.name in ("emb.gather", "emb.bag")]
    renorm = next(op for op in ops(module) if op.results and op.result is lookup.operands[0])
    assert renorm.attrs.get("op") == "ScatterND"  # the lookup reads the updated table, not the weight
    param = renorm.operands[0]
    weights = load_weights_any(str(path))
    table = weights[next(op.attrs["name"] for op in ops(module) if op.name == "param" and op.result is param)]
    feeds = dict(np.load(ATEN / f"{name}.in.npz"))
    idx = feeds["indices"].reshape(-1)
    norms = np.linalg.norm(table[idx], axis=1)
    limit = MAX_NORM[name]
    assert (norms > limit * 1.5).any() and (norms < limit).any()
    fixed = _renormed(table, idx, limit)
    if lookup.name == "emb.gather":
        want = fixed[feeds["indices"]]
        stale = table[feeds["indices"]]
    else:  # a mean bag over 1-D indices and offsets (an empty bag gives 0)
        ends = [*feeds["offsets"][1:], idx.size]
        want = np.stack([fixed[idx[a:b]].mean(0) if b > a else np.zeros(table.shape[1])
                         for a, b in zip(feeds["offsets"], ends)])
        stale = np.stack([table[idx[a:b]].mean(0) if b > a else np.zeros(table.shape[1])
                          for a, b in zip(feeds["offsets"], ends)])
    got = run(path, "O3", feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert not np.allclose(got, stale, rtol=RTOL, atol=ATOL)  # without the renormalisation it would differ


def _module(name: str, suffix: str = ".pt2") -> Op:
    return import_model(str(ATEN / f"{name}{suffix}"), "w")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_embedding_operations_become_emb_ops(suffix: str) -> None:
    dlrm = op_types(_module("dlrm_tril", suffix))
    assert dlrm.count("emb.bag") == 3 and dlrm.count("GatherND") == 1 and dlrm.count("MatMul") == 1
    pooled = _module("dlrm_lists_weighted", suffix)
    bags = [op for op in ops(pooled) if op.name == "emb.bag"]
    assert len(bags) == 3 and all(len(b.operands) == 4 for b in bags)  # per-sample weights
    assert all(b.operands[3].type.shape == b.operands[1].type.shape for b in bags)
    lookups = [op for op in ops(pooled) if op.name == "emb.gather"]  # v_W_l[k].gather(0, indices)
    assert len(lookups) == 3 and all(len(op.operands[0].type.shape) == 1 for op in lookups)
    take = next(op for op in ops(_module("take", suffix)) if op.name == "emb.gather")
    assert take.attrs == {"negative": "wrap"} and take.operands[0].type.shape == (120,)
    flat = op_types(_module("bag_sum_2d", suffix))  # offsets of a 2-D bag are a constant, not computed
    assert flat.count("emb.bag") == 1 and "Concat" not in flat and "Range" not in flat


def test_dlrm_interaction_pairs_are_one_constant_table() -> None:
    """tril_indices and the reference's index lists are known at import: Z[:, li, lj] is one GatherND
    with a constant index table, the pairs below the diagonal in row-major order."""
    for name in ("dlrm_tril", "dlrm_lists_weighted"):
        module = _module(name)
        (gnd,) = [op for op in ops(module) if op.attrs.get("op") == "GatherND"]
        param = next(op for op in ops(module) if op.name == "param" and op.result is gnd.operands[1])
        table = load_weights_any(str(ATEN / f"{name}.pt2"))[param.attrs["name"]]
        np.testing.assert_array_equal(table, np.stack(np.tril_indices(4, -1), axis=-1))


def test_docs_operators_is_generated_from_the_table() -> None:
    assert DOC.read_text() == render(), "docs/operators.md is stale: run python tests/gen_operators_doc.py"


# ---------------------------------------------------------------------------------------------
# Refusals


def _rewrite(src: Path, dst: Path, old: str, new: str) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith((".py", "model.json")):
                data = data.replace(old.encode(), new.encode())
            zout.writestr(info, data)
    return dst


@pytest.mark.parametrize("suffix, old, where", [
    (".pt", "torch.take(", r"'torch\.cholesky\(\.\.\.\)' at code/__torch__(/[\w.]+)*\.py:\d+"),
    (".pt2", "torch.ops.aten.take.default", r"node 'take' \(torch\.ops\.aten\.cholesky\.default\)"),
])
def test_refusal_names_the_operator_and_where_it_is(tmp_path: Path, run: Callable[..., Any], suffix: str,
                                                    old: str, where: str) -> None:
    new = old.replace("take", "cholesky")
    bad = _rewrite(ATEN / f"take{suffix}", tmp_path / f"bad{suffix}", old, new)
    with pytest.raises(EmberError, match=where + r": aten::cholesky is not one of the operators Ember "
                       r"translates \(docs/operators\.md lists them\)"):
        import_model(str(bad), "w")
    done = run("import", str(bad), "-o", str(tmp_path / "bad.eir"))
    err = done.stderr.decode()
    assert done.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "docs/operators.md" in err and len(err) < 400  # a pointer, not the list of operators
    assert not (tmp_path / "bad.eir").exists()


# ---------------------------------------------------------------------------------------------
# Every case of samples/gen_aten_cases.py, built with torch


def _torch_case_names() -> list[str]:
    """Names of the torch-built cases (none without torch: those tests are then skipped)."""
    if importlib.util.find_spec("torch") is None:
        return []
    return sorted(_aten_cases().torch_cases())


def _aten_cases() -> Any:
    sys.path.insert(0, str(ROOT / "samples"))
    try:
        import gen_aten_cases
    finally:
        sys.path.remove(str(ROOT / "samples"))
    return gen_aten_cases


HF = [f"{m}_{a}" for m in ("bert", "gpt2", "distilbert") for a in ("eager", "sdpa")]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Any, Path, np.ndarray]]:
    """name -> (case, archive stem, eager output), tracing and exporting each model once."""
    pytest.importorskip("torch")
    cases = _aten_cases()
    cache: dict[str, tuple[Any, Path, np.ndarray]] = {}
    folder = tmp_path_factory.mktemp("aten")

    def get(name: str) -> tuple[Any, Path, np.ndarray]:
        if name not in cache:
            makers = cases.torch_cases()
            case = (makers[name] if name in makers else cases.hf_cases()[name])()
            want = cases.eager(case)
            cases.save(case, folder / name)
            cache[name] = (case, folder / name, want)
        return cache[name]

    return get


def _check_built(built: Callable[[str], tuple[Any, Path, np.ndarray]], name: str, suffix: str) -> None:
    case, stem, want = built(name)
    path = stem.with_suffix(suffix)
    feeds = _aten_cases().flat(case.feeds)
    if case.max_norm is not None:  # the table as stored has rows above max_norm that the inputs read
        weights = load_weights_any(str(path))
        table = next(w for w in weights.values() if w.ndim == 2 and w.dtype == np.float32)
        assert (np.linalg.norm(table[feeds["indices"].reshape(-1)], axis=1) > case.max_norm).any()
    for level in LEVELS:
        got = run(path, level, feeds)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}{suffix} at -{level}")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", _torch_case_names() or [pytest.param("-", marks=pytest.mark.skip("needs torch"))])
def test_model_built_with_torch_matches_eager(built: Callable[..., Any], name: str, suffix: str) -> None:
    _check_built(built, name, suffix)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", HF)
def test_hugging_face_model_matches_eager(built: Callable[..., Any], name: str, suffix: str) -> None:
    pytest.importorskip("transformers")
    _check_built(built, name, suffix)
