"""Build the real-model corpus in ``samples/corpus`` (run once; the outputs are committed).

Needs torch==2.13.0 (CPU), onnxscript 0.7.2, onnxruntime and transformers 5.23.0; the TorchRec model
also needs torchrec 1.9.2 with fbgemm-gpu-cpu 1.8.0 (docs/corpus.md says why that pair, and how to
make a throwaway environment to run ``--only torchrec_ebc`` in).  Nothing in Ember imports torch: the
tests only read what this script writes.  The models are defined in ``zoo.py``; this script gives them
the corpus's sizes, seeds and inputs (``build`` seeds torch from the model's name before each build).

Every model is exported every way it can be:

* the TorchScript ONNX exporter (``dynamo=False``, its default opset), static shapes;
* the dynamo ONNX exporter at opsets 18 and 20, with and without ``dynamic_shapes`` (the batch and the
  number of indices), each under the hash seeds of ``HASH_SEEDS``: the exporter lays out the carried
  values of an EmbeddingBag ``Loop`` in an order that depends on ``PYTHONHASHSEED``, so the dynamo
  exports run in subprocesses with that variable set, and each file's order is read back and recorded;
* ``.pt`` (torch.jit.trace + torch.jit.save) and ``.pt2`` (torch.export.export + torch.export.save, with
  and without ``dynamic_shapes``).

An exporter that refuses a model is a fact recorded in the manifest, not a failure.  Identical files
(same bytes) are stored once.  The dynamo exports lose their nodes' ``metadata_props`` (stack traces,
which would be three quarters of the corpus) and nothing else.

Per model, ``samples/corpus/<model>/`` holds ``in.npz`` (keyed by
``forward``'s parameters, which the exports keep as input names), ``torch.out.npz`` (eager PyTorch:
the reference for ``.pt``/``.pt2``) and for every ``.onnx`` file ``<file>.out.npz`` (onnxruntime's
outputs keyed by the graph's output names: the reference for that file).  ``manifest.json`` lists every
export attempt: model, format, exporter, opset, dynamic shapes, hash seed, file or refusal, loop order,
reference file, and how far onnxruntime is from eager PyTorch.

Usage: ``python samples/gen_corpus.py [--only NAME,NAME...]``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402  (the models are defined there)
from zoo import Case, as_torch, eager  # noqa: E402

OUT = Path(__file__).resolve().parent / "corpus"
# PYTHONHASHSEED values for the dynamo exports; on torch 2.13.0 + onnxscript 0.7.2 (CPython 3.11) seed 0
# puts an EmbeddingBag Loop's carried values in the order [result, index_tensor] and seed 1 in the order
# [index_tensor, result].  The manifest records the order each file actually has.
HASH_SEEDS = (0, 1)
OPSETS = (18, 20)
RTOL, ATOL = 1e-4, 1e-5
ROWS, DIM = 40, 8
PAD = zoo.PAD


# ---------------------------------------------------------------------------------------------
# The cases: the models of zoo.py with the corpus's sizes and inputs


def embedding_cases() -> dict[str, Callable[[], Case]]:
    """The torch.nn embedding variants, on small tables; bags include empty ones, padded bags the padding row."""
    one_d = {"indices": {0: "num_indices"}, "offsets": {0: "batch"}}
    two_d = {"indices": {0: "batch"}}

    def feeds_1d(seed: int, pad: bool = False, last: bool = False) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        indices, offsets = zoo.bag_inputs(rng, ROWS, [3, 0, 5, 1, 4, 2])
        if pad:
            indices[indices == PAD] = PAD + 1
            indices[[0, 4, 5, 8, 12]] = PAD  # bags 0, 2 and 4 hold it among others, bag 3 holds only it
        if last:
            offsets = np.append(offsets, len(indices)).astype(np.int64)
        return {"indices": indices, "offsets": offsets}

    def feeds_2d(seed: int, pad: bool = False) -> dict[str, np.ndarray]:
        indices = np.random.default_rng(seed).integers(0, ROWS, size=(5, 3), dtype=np.int64)
        if pad:
            indices[indices == PAD] = PAD + 1
            indices[1, 0] = PAD
            indices[3] = PAD  # a bag of nothing but padding
        return {"indices": indices}

    def bag(mode: str, **kw: object) -> nn.EmbeddingBag:
        return nn.EmbeddingBag(ROWS, DIM, mode=mode, **kw)  # type: ignore[arg-type]

    def weighted(seed: int) -> dict[str, np.ndarray]:
        f = feeds_1d(seed)
        f["weights"] = np.random.default_rng(seed + 100).standard_normal(len(f["indices"])).astype(np.float32)
        return f

    def weighted_2d(seed: int) -> dict[str, np.ndarray]:
        f = feeds_2d(seed)
        f["weights"] = np.random.default_rng(seed + 100).standard_normal(f["indices"].shape).astype(np.float32)
        return f

    large = 3.0  # max_norm below the norm of most rows, so the renormalisation shows
    out: dict[str, Callable[[], Case]] = {
        "embedding": lambda: Case(zoo.Lookup(nn.Embedding(ROWS, DIM)), feeds_2d(1), two_d),
        "embedding_padding_idx": lambda: Case(zoo.Lookup(zoo.padded(nn.Embedding(ROWS, DIM, padding_idx=PAD))),
                                              feeds_2d(2, pad=True), two_d),
        "embedding_max_norm": lambda: Case(zoo.Lookup(nn.Embedding(ROWS, DIM, max_norm=large)), feeds_2d(3), two_d),
        "f_embedding": lambda: Case(zoo.FunctionalEmbedding(torch.randn(ROWS, DIM)), feeds_2d(4), two_d),
        "take": lambda: Case(zoo.Take(torch.randn(ROWS, DIM)),
                             {"indices": np.random.default_rng(5).integers(0, ROWS * DIM, size=(4, 6))},
                             {"indices": {0: "batch"}}),
        "f_embedding_bag": lambda: Case(zoo.FunctionalBag(torch.randn(ROWS, DIM), "mean"), feeds_1d(6), one_d),
        "bag_max_norm": lambda: Case(zoo.Bag(bag("sum", max_norm=large)), feeds_1d(7), one_d),
        "bag_last": lambda: Case(zoo.Bag(bag("sum", include_last_offset=True)), feeds_1d(8, last=True),
                                 one_d, least={"batch": 3}),  # torch.export's guard: two bags at least
        "bag_weighted": lambda: Case(zoo.WeightedBag(bag("sum")), weighted(9),
                                     {**one_d, "weights": {0: "num_indices"}}),
        "bag_weighted_2d": lambda: Case(zoo.WeightedBag2D(bag("sum")), weighted_2d(10),
                                        {**two_d, "weights": {0: "batch"}}),
    }
    for k, mode in enumerate(("sum", "mean", "max")):
        out[f"bag_{mode}"] = (lambda m=mode, s=20 + k: Case(zoo.Bag(bag(m)), feeds_1d(s), one_d))
        out[f"bag_{mode}_2d"] = (lambda m=mode, s=30 + k: Case(zoo.Lookup(bag(m)), feeds_2d(s), two_d))
        out[f"bag_pad_{mode}"] = (lambda m=mode, s=40 + k: Case(zoo.Bag(zoo.padded(bag(m, padding_idx=PAD))),
                                                                 feeds_1d(s, pad=True), one_d))
    return out


def dlrm_case(itself: bool, tril: bool) -> Case:
    """DLRM with four tables, the reference's initialisation from numpy seed 3, batch 6, bags of 0 to 4."""
    ln_emb, m_spa, batch = [40, 30, 50, 20], 8, 6
    pairs = (len(ln_emb) + 1) * (len(ln_emb) + (2 if itself else 0)) // 2
    model = zoo.DLRM4(m_spa, ln_emb, [13, 16, m_spa], [m_spa + pairs, 16, 1], np.random.default_rng(3),
                      itself=itself, tril=tril)
    rng = np.random.default_rng(17)
    feeds: dict[str, np.ndarray] = {"dense_x": rng.standard_normal((batch, 13)).astype(np.float32)}
    dynamic: dict[str, dict[int, str]] = {"dense_x": {0: "batch"}}
    for k, rows in enumerate(ln_emb):
        lengths = [int(n) for n in rng.integers(0, 5, size=batch)]
        feeds[f"indices_{k}"], feeds[f"offsets_{k}"] = zoo.bag_inputs(rng, rows, lengths)
        dynamic[f"offsets_{k}"], dynamic[f"indices_{k}"] = {0: "batch"}, {0: f"num_indices_{k}"}
    order = list(inspect.signature(model.forward).parameters)
    return Case(model, {k: feeds[k] for k in order}, dynamic)


def torchrec_case() -> Case:
    lengths = np.array([2, 0, 3, 1, 1, 2, 0, 3], dtype=np.int64)  # f0: 4 bags, then f1: 4 bags
    rng = np.random.default_rng(29)
    values = np.concatenate([rng.integers(0, ROWS, size=6), rng.integers(0, 30, size=6)]).astype(np.int64)
    return Case(zoo.SparseArch([ROWS, 30], DIM), {"values": values, "lengths": lengths}, {"values": {0: "num_values"}})


def all_cases() -> dict[str, Callable[[], Case]]:
    cases: dict[str, Callable[[], Case]] = {kind: lambda k=kind: zoo.hf_case(k) for kind in zoo.HF_KINDS}
    cases |= {"dlrm": lambda: dlrm_case(itself=False, tril=False),
              "dlrm_tril": lambda: dlrm_case(itself=True, tril=True), "torchrec_ebc": torchrec_case}
    cases.update(embedding_cases())
    return cases


def build(name: str) -> Case:
    """Build a case afresh with fixed seeds, so every process (and every export) sees the same weights."""
    torch.manual_seed(zlib.crc32(name.encode()))
    case = all_cases()[name]()
    case.model.eval()
    return case


# ---------------------------------------------------------------------------------------------
# Exporting


def tensors(case: Case) -> tuple[torch.Tensor, ...]:
    return as_torch(case.feeds)


def dynamic_shapes(case: Case) -> dict[str, dict[int, object]]:
    dims: dict[str, object] = {}
    spec: dict[str, dict[int, object]] = {}
    for name in case.feeds:
        axes = case.dynamic.get(name, {})
        spec[name] = {ax: dims.setdefault(d, torch.export.Dim(d, min=case.least.get(d, 1))) for ax, d in axes.items()}
    return spec


def refusal(exc: BaseException) -> str:
    """The exporter's own words, first line, short: the manifest says why a file is missing."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    lines = [ln.strip() for ln in text if ln.strip()]
    return " ".join(lines[:3])[:400]


def fresh_model(case: Case) -> nn.Module:
    """A deep copy, so that in-place renormalisation (max_norm) by one export does not reach the next."""
    return copy.deepcopy(case.model)


def export_dynamo(case: Case, path: Path, opset: int, dynamic: bool) -> None:
    kwargs = {"dynamic_shapes": dynamic_shapes(case)} if dynamic else {}
    torch.onnx.export(fresh_model(case), tensors(case), str(path), dynamo=True, opset_version=opset,
                      external_data=False, input_names=list(case.feeds), verbose=False, **kwargs)
    strip_node_metadata(path)


def strip_node_metadata(path: Path) -> None:
    """Drop the nodes' metadata_props (the dynamo exporter's stack traces and FX names, three quarters
    of a file's bytes); the graph, its names and its initializers stay as exported."""
    model = onnx.load(str(path))
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            del node.metadata_props[:]
            stack.extend(a.g for a in node.attribute if a.HasField("g"))
            stack.extend(g for a in node.attribute for g in a.graphs)
    onnx.save(model, str(path))


def export_torchscript(case: Case, path: Path) -> None:
    torch.onnx.export(fresh_model(case), tensors(case), str(path), dynamo=False,
                      input_names=list(case.feeds), output_names=["output"])


def dynamo_worker(names: list[str], folder: Path) -> None:
    """Run in a subprocess under one PYTHONHASHSEED: every dynamo export of `names` into `folder`,
    with the refusals in ``refused.json``."""
    refused: dict[str, str] = {}
    for name in names:
        case = build(name)
        for opset in OPSETS:
            for dynamic in (False, True):
                path = folder / f"{name}.{opset}.{int(dynamic)}.onnx"
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        export_dynamo(case, path, opset, dynamic)
                except Exception as exc:  # noqa: BLE001  an exporter refusing a model is a recorded fact
                    refused[path.name] = refusal(exc)
                    path.unlink(missing_ok=True)
    (folder / "refused.json").write_text(json.dumps(refused, indent=1))


def loop_order(model: onnx.ModelProto) -> str | None:
    """The carried values of the graph's Loops (any depth), named without the exporter's numeric suffix:
    e.g. ``index_tensor,result``; several distinct orders are joined with ``;``, a Loop that carries
    nothing (its results are scan outputs) is ``-``; None without a Loop."""
    orders: list[str] = []

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                    if node.op_type == "Loop" and attr.name == "body":
                        carried = ",".join(i.name.rstrip("0123456789").rstrip("_") for i in sub.input[2:]) or "-"
                        if carried not in orders:
                            orders.append(carried)
                    walk(sub)

    walk(model.graph)
    return ";".join(orders) if orders else None


def ort_outputs(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    model = onnx.load(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    got = sess.run(None, {k: feeds[k] for k in names})
    return {o.name: v for o, v in zip(model.graph.output, got)}


def max_diff(got: np.ndarray, want: np.ndarray) -> float | None:
    """Largest absolute difference, or None when the shapes differ."""
    if got.shape != want.shape:
        return None
    return float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0))


class Store:
    """Writes each distinct file once (by content) under the model's folder and builds manifest entries."""

    def __init__(self, name: str, case: Case) -> None:
        self.name, self.case = name, case
        self.folder = OUT / name
        self.by_hash: dict[str, str] = {}
        self.entries: list[dict[str, object]] = []
        self.want = {"output": eager(case)}

    def add(self, src: Path | None, stem: str, suffix: str, **facts: object) -> None:
        entry: dict[str, object] = {"model": self.name, "format": suffix.lstrip("."), **facts,
                                    "inputs": f"{self.name}/in.npz"}
        if src is None:
            self.entries.append({**entry, "file": None})
            return
        data = src.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.by_hash:
            rel = f"{self.name}/{stem}{suffix}"
            (OUT / rel).write_bytes(data)
            self.by_hash[digest] = rel
        rel = self.by_hash[digest]
        entry.update(file=rel, sha256=digest[:16])
        if suffix == ".onnx":
            entry.update(self.onnx_facts(OUT / rel))
        else:
            entry.update(reference=f"{self.name}/torch.out.npz", reference_from="torch eager",
                         archive_matches_eager=self.archive_matches(OUT / rel))
        self.entries.append(entry)

    def onnx_facts(self, path: Path) -> dict[str, object]:
        model = onnx.load(str(path))
        ref = path.with_name(path.name[:-5] + ".out.npz")
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        facts: dict[str, object] = {"opset_in_file": opset, "loop_order": loop_order(model),
                                    "reference": f"{self.name}/{ref.name}", "reference_from": "onnxruntime"}
        try:
            got = ort_outputs(path, self.case.feeds)
        except Exception as exc:  # noqa: BLE001  recorded: a file onnxruntime cannot run has no reference
            facts.update(reference=None, onnxruntime_error=refusal(exc))
            ref.unlink(missing_ok=True)
            return facts
        np.savez(ref, **got)
        first = next(iter(got.values()))
        diff = max_diff(first, self.want["output"])
        facts["ort_vs_torch_max_abs"] = diff
        facts["ort_matches_torch"] = diff is not None and bool(
            np.allclose(first, self.want["output"], rtol=RTOL, atol=ATOL))
        return facts

    def archive_matches(self, path: Path) -> bool:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if path.suffix == ".pt":
                got = torch.jit.load(str(path))(*tensors(self.case))
            else:
                got = torch.export.load(str(path)).module()(*tensors(self.case))
        return bool(np.allclose(got.numpy(), self.want["output"], rtol=RTOL, atol=ATOL))


def run_workers(names: list[str], tmp: Path) -> dict[int, Path]:
    """One subprocess per hash seed, each doing every dynamo export of `names`."""
    folders = {seed: tmp / f"hs{seed}" for seed in HASH_SEEDS}
    running = []
    for seed, folder in folders.items():
        folder.mkdir()
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        cmd = [sys.executable, __file__, "--dynamo-worker", str(folder), "--only", ",".join(names)]
        with open(folder / "log.txt", "w") as log:
            running.append((folder, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)))
    for folder, proc in running:
        if proc.wait() != 0:
            raise SystemExit(f"a dynamo export worker failed; see its log:\n{(folder / 'log.txt').read_text()[-3000:]}")
    return folders


def export_model(name: str, folders: dict[int, Path], tmp: Path) -> list[dict[str, object]]:
    case = build(name)
    store = Store(name, case)
    store.folder.mkdir(parents=True, exist_ok=True)
    for old in store.folder.iterdir():
        old.unlink()
    np.savez(store.folder / "in.npz", **case.feeds)
    np.savez(store.folder / "torch.out.npz", **store.want)

    def attempt(stem: str, suffix: str, write: Callable[[Path], None], **facts: object) -> None:
        path = tmp / f"{name}.{stem}{suffix}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                write(path)
        except Exception as exc:  # noqa: BLE001  an exporter refusing a model is a recorded fact
            store.add(None, stem, suffix, **facts, refused=refusal(exc))
            return
        store.add(path, stem, suffix, **facts)

    attempt("ts", ".onnx", lambda p: export_torchscript(case, p), exporter="torchscript", opset=None,
            dynamic_shapes=False, hash_seed=None)
    for opset in OPSETS:
        for dynamic in (False, True):
            shape = "dynamic" if dynamic else "static"
            files = {seed: folders[seed] / f"{name}.{opset}.{int(dynamic)}.onnx" for seed in HASH_SEEDS}
            same = len({f.read_bytes() if f.exists() else b"" for f in files.values()}) == 1
            for seed, f in files.items():
                refused = json.loads((folders[seed] / "refused.json").read_text()).get(f.name)
                stem = f"dynamo{opset}.{shape}" + ("" if same else f".hs{seed}")
                store.add(None if refused else f, stem, ".onnx", exporter="dynamo", opset=opset,
                          dynamic_shapes=dynamic, hash_seed=seed, **({"refused": refused} if refused else {}))
    attempt("traced", ".pt", lambda p: torch.jit.save(torch.jit.trace(fresh_model(case), tensors(case)), str(p)),
            exporter="torch.jit.trace", opset=None, dynamic_shapes=False, hash_seed=None)
    for dynamic in (False, True):
        spec = {"dynamic_shapes": dynamic_shapes(case)} if dynamic else {}
        attempt("exported" + (".dynamic" if dynamic else ""), ".pt2",
                lambda p, s=spec: torch.export.save(torch.export.export(fresh_model(case), tensors(case), **s), str(p)),
                exporter="torch.export", opset=None, dynamic_shapes=dynamic, hash_seed=None)
    return store.entries


def torchrec_available() -> bool:
    try:
        import torchrec  # noqa: F401
    except Exception:  # noqa: BLE001  torchrec or its fbgemm_gpu fails to import or load
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names (default: all)")
    parser.add_argument("--dynamo-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.only.split(",") if args.only else sorted(all_cases())
    if unknown := sorted(set(names) - set(all_cases())):
        raise SystemExit(f"unknown model(s): {', '.join(unknown)}")
    if args.dynamo_worker:
        dynamo_worker(names, args.dynamo_worker)
        return
    if "torchrec_ebc" in names and not torchrec_available():
        if args.only:
            raise SystemExit("torchrec_ebc needs torchrec 1.9.2 and fbgemm-gpu-cpu 1.8.0 (see docs/corpus.md)")
        print("note: torchrec does not import here; keeping the committed torchrec_ebc files", file=sys.stderr)
        names.remove("torchrec_ebc")
    OUT.mkdir(exist_ok=True)
    manifest_path = OUT / "manifest.json"
    kept = [e for e in json.loads(manifest_path.read_text())["exports"] if e["model"] not in names] \
        if manifest_path.exists() else []
    entries: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = run_workers(names, Path(tmp))
        for name in names:
            try:
                entries += export_model(name, folders, Path(tmp))
            except Exception:
                traceback.print_exc()
                raise SystemExit(f"{name}: building or checking the model failed") from None
            print(f"{name}: {sum(1 for e in entries if e['model'] == name and e['file'])} exports")
    entries = sorted(kept + entries, key=lambda e: (str(e["model"]), str(e["format"]), str(e.get("file"))))
    manifest = {"torch": torch.__version__, "hash_seeds": list(HASH_SEEDS), "rtol": RTOL, "atol": ATOL,
                "exports": entries}
    tmp_manifest = manifest_path.with_suffix(".json.tmp")
    tmp_manifest.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp_manifest.replace(manifest_path)


if __name__ == "__main__":
    main()
