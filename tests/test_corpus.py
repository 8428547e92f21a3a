"""The real-model corpus (samples/corpus, made by samples/gen_corpus.py): every exported file imports,
compiles at -O0 and -O3, simulates to what onnxruntime (for .onnx) or eager PyTorch (for .pt/.pt2)
computed, and -O3 takes no more cycles than -O0.

The corpus needs no torch: the exports, their inputs and their reference outputs are committed.
Cases that fail today are listed in XFAIL with the reason, grouped by the part of Ember that has to
change; they are strict, so a case that starts passing fails until its entry is removed.

A file is simulated once per distinct program: files whose imported IR prints the same (and whose
weights are the same) share one simulation, so e.g. the two hash-seed variants of a dynamo export
cost one run once the importer reads both loop orders alike.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json

import numpy as np
import onnx
import pytest
from conftest import ROOT, compile_model

import ember.dialects  # noqa: F401
from ember.frontends import import_model, load_weights_any
from ember.ir.printer import print_module
from ember.machine import load_machine
from ember.sim.reference import simulate
from ember.sim.stats import Stats

CORPUS = ROOT / "samples" / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
EXPORTS: list[dict] = MANIFEST["exports"]
RTOL, ATOL = 1e-4, 1e-5
LEVELS = ("O0", "O3")

# Cases failing today, as fnmatch patterns over "<file>" (every test of that file), "<file>@O0" /
# "<file>@O3" (the simulation at that level) and "<file>#cycles" (the -O3 <= -O0 check); the first
# pattern that matches gives the reason.  Delete an entry when its cause is fixed.
XFAIL: dict[str, str] = {}


def files() -> list[str]:
    return sorted({e["file"] for e in EXPORTS if e["file"]})


def entry(file: str) -> dict:
    return next(e for e in EXPORTS if e["file"] == file)


def reason(file: str, check: str) -> str | None:
    """Why `check` ("O0", "O3" or "cycles") of `file` is expected to fail today, if it is."""
    keys = [file, f"{file}#cycles", f"{file}@O0", f"{file}@O3"] if check == "cycles" else [file, f"{file}@{check}"]
    for key in keys:
        for pattern, why in XFAIL.items():
            if fnmatch.fnmatchcase(key, pattern):
                return why
    return None


def in_bench(file: str) -> bool:
    """A dynamo export at opset 20, or under the second hash seed: `make bench` simulates it, and `make test` only
    imports it (test_every_export_imports), simulating the opset-18, hash-seed-0 export of the same model, the
    TorchScript exporter's, and the archives'."""
    return "/dynamo20." in file or ".hs1." in file


def case(file: str, *args: str, check: str) -> object:
    # make test's --dist loadfile gives one worker every case of this module, so a file's -O0 and -O3 runs are
    # simulated once (`run` keeps them)
    marks = []
    if in_bench(file):
        marks.append(pytest.mark.slow)
    if why := reason(file, check):
        marks.append(pytest.mark.xfail(strict=True, reason=why))
    return pytest.param(file, *args, marks=marks, id="-".join((file, *args)))


_runs: dict[tuple[str, str, str, str], tuple[dict[str, np.ndarray], Stats]] = {}


@functools.cache
def program_key(file: str) -> tuple[str, str]:
    """What makes two files the same program: the imported IR's text and the weights it names."""
    path = CORPUS / file
    text = print_module(import_model(str(path), "w"))
    digest = hashlib.sha256()
    for name, value in sorted(load_weights_any(str(path)).items()):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return text, digest.hexdigest()


def run(file: str, level: str) -> tuple[dict[str, np.ndarray], Stats]:
    """Compile `file` at `level` and simulate it on its model's inputs, once per distinct program."""
    text, weights = program_key(file)
    key = (text, weights, entry(file)["inputs"], level)
    if key not in _runs:
        inputs = dict(np.load(CORPUS / key[2]))
        _runs[key] = simulate(compile_model(CORPUS / file, level), inputs, load_machine("default"))
    return _runs[key]


def reference(file: str) -> dict[str, np.ndarray]:
    """onnxruntime's outputs for an .onnx file, eager PyTorch's for an archive (and for an .onnx file
    onnxruntime could not run)."""
    e = entry(file)
    return dict(np.load(CORPUS / (e.get("reference") or f"{e['model']}/torch.out.npz")))


@pytest.mark.parametrize("file,level", [case(f, lv, check=lv) for f in files() for lv in LEVELS])
def test_simulation_matches_reference(file: str, level: str) -> None:
    got, _ = run(file, level)
    want = reference(file)
    if sorted(got) != sorted(want) and len(got) == len(want) == 1:  # torch's "output" for an ONNX output
        want = {next(iter(got)): next(iter(want.values()))}
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=f"{file} at -{level}: {name}")


@pytest.mark.parametrize("file", [f for f in files() if in_bench(f)])
def test_every_export_imports(file: str) -> None:
    """The exports `make test` does not simulate still import, with weights, in `make test`."""
    text, _ = program_key(file)
    assert "emb." in text, file


@pytest.mark.parametrize("file", [case(f, check="cycles") for f in files()])
def test_o3_is_not_slower_than_o0(file: str) -> None:
    """Within 1%: a real memory and branch predictor make a few cycles of a run of 2,000 depend on the order of
    requests and branches, which no pass foresees (-O3's vectorized zero fill of a padded bag's output is 2 cycles
    slower than the scalar one on its 4-element loop)."""
    o0, o3 = run(file, "O0")[1]["cycles"], run(file, "O3")[1]["cycles"]
    assert o3 <= o0 * 1.01, f"{file}: -O3 takes {o3:g} cycles, -O0 {o0:g}"


# ---------------------------------------------------------------------------------------------
# The corpus itself: what the manifest promises is there


def test_every_model_was_exported_every_way() -> None:
    """Each model has an entry (a file or the exporter's refusal) for every exporter, opset, shape mode
    and hash seed, and every named file and reference exists."""
    seeds = MANIFEST["hash_seeds"]
    want = {("onnx", "torchscript", None, False, None), ("pt", "torch.jit.trace", None, False, None),
            ("pt2", "torch.export", None, False, None), ("pt2", "torch.export", None, True, None)}
    want |= {("onnx", "dynamo", o, d, s) for o in (18, 20) for d in (False, True) for s in seeds}
    models = sorted({e["model"] for e in EXPORTS})
    assert len(models) >= 20 and len(seeds) >= 2
    for model in models:
        got = [(e["format"], e["exporter"], e["opset"], e["dynamic_shapes"], e["hash_seed"])
               for e in EXPORTS if e["model"] == model]
        assert sorted(got, key=str) == sorted(want, key=str), model
    for e in EXPORTS:
        assert bool(e["file"]) != bool(e.get("refused")), e
        assert (CORPUS / e["inputs"]).is_file()
        if e["file"]:
            assert (CORPUS / e["file"]).is_file()
            assert e.get("reference") is None or (CORPUS / e["reference"]).is_file()


def carried(model: onnx.ModelProto) -> list[list[str]]:
    """The loop-carried inputs of every Loop body, at any depth, numeric suffixes dropped."""
    found: list[list[str]] = []
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            subgraphs = [a.g for a in node.attribute if a.HasField("g")] + [g for a in node.attribute for g in a.graphs]
            if node.op_type == "Loop":
                body = next(a.g for a in node.attribute if a.name == "body")
                found.append([i.name.rstrip("0123456789").rstrip("_") for i in body.input[2:]])
            stack.extend(subgraphs)
    return found


def test_dynamo_embedding_bag_loops_come_in_both_orders() -> None:
    """The recorded loop order is the file's, and for every model whose dynamo export has an
    EmbeddingBag Loop the corpus holds both orders of its carried values."""
    by_model: dict[str, set[str]] = {}
    for e in EXPORTS:
        if e["file"] and e["format"] == "onnx":
            loops = {",".join(c) or "-" for c in carried(onnx.load(str(CORPUS / e["file"])))}  # "-": carries nothing
            assert loops == (set(e["loop_order"].split(";")) if e["loop_order"] else set()), e["file"]
            if e["exporter"] == "dynamo" and e["loop_order"]:
                by_model.setdefault(e["model"], set()).add(e["loop_order"])
    assert "bag_sum" in by_model and "dlrm" in by_model
    for model, orders in by_model.items():
        firsts = {o.split(";")[0] for o in orders}
        assert len(firsts) >= 2, f"{model}: only {firsts}"
        assert {tuple(sorted(f.split(","))) for f in firsts} == {tuple(sorted(next(iter(firsts)).split(",")))}


def test_corpus_is_small() -> None:
    total = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert total < 15 * 2**20, f"samples/corpus holds {total / 2**20:.1f} MiB"
