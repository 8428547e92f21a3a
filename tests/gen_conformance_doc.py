"""The ONNX conformance suite's definition, and the script that writes docs/conformance.md from it.

`tests/test_onnx_conformance.py` runs the node test cases the `onnx` package ships for the
operators in `OPS`, in each variant of `VARIANTS`, at each level of `LEVELS`.  `DECLINES` is the
one table of runs that are expected to raise `EmberError`, with the reason; the test imports it,
and `python tests/gen_conformance_doc.py` renders it, so the document cannot drift from the test.
"""

from __future__ import annotations

import functools
import re
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "conformance.md"

OPS = ("Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND", "ReduceSum", "ReduceMean", "ReduceMax")
LEVELS = ("O0", "O3", "core")
VARIANTS = {
    "inputs": "the model as shipped: every tensor, `data` included, is a graph input",
    "init": "the first input (`data`) stored as an initializer, as an exported model carries a weight table: "
            "this is the form in which Ember raises `Gather(axis=0)` of a float tensor to `emb.gather`",
}


@dataclass(frozen=True)
class Case:
    """One backend node test case: its single-node model and its (input, output) data sets."""

    op: str
    name: str
    model: ModelProto
    data_sets: tuple[tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]], ...]


@dataclass(frozen=True)
class Decline:
    """A run expected to raise EmberError whose message matches `error`; `reason` says why."""

    case: str
    variant: str
    levels: tuple[str, ...]
    error: str
    reason: str

    @property
    def is_bug(self) -> bool:
        return self.reason.startswith("BUG:")


DECLINES: tuple[Decline, ...] = ()
"""None today.  `test_gather_negative_indices` (`init`) was the last: `emb.gather` now carries ONNX's
`negative = "wrap"`, so an index in [-n, 0) counts from the end there too."""


def _array(x: object) -> np.ndarray:
    """A data-set value as an array (cases may give TensorProtos)."""
    return numpy_helper.to_array(x) if isinstance(x, TensorProto) else np.asarray(x)


@functools.cache
def backend_cases() -> tuple[Case, ...]:
    """The onnx package's node test cases for `OPS`: single-node models, not function expansions."""
    from onnx.backend.test.case.node import collect_testcases  # noqa: PLC0415  (slow: imports every case)

    with warnings.catch_warnings():  # the case generators divide by zero on purpose (empty reductions)
        warnings.simplefilter("ignore")
        every = collect_testcases()
    out = []
    for tc in every:
        nodes = tc.model.graph.node
        if len(nodes) == 1 and nodes[0].op_type in OPS and nodes[0].domain in ("", "ai.onnx"):
            sets = tuple((tuple(_array(x) for x in ins), tuple(_array(y) for y in outs)) for ins, outs in tc.data_sets)
            out.append(Case(nodes[0].op_type, tc.name, tc.model, sets))
    missing = set(OPS) - {c.op for c in out}
    if missing:  # collect_testcases keeps global state: an earlier filtered call would hide cases
        raise RuntimeError(f"no backend test cases found for {sorted(missing)}")
    return tuple(sorted(out, key=lambda c: (OPS.index(c.op), c.name)))


def variant_model(case: Case, variant: str, inputs: tuple[np.ndarray, ...]) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """The model of `case` in `variant`, and the feeds for one data set, named by the graph inputs."""
    model = ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    names = [i.name for i in graph.input]
    feeds = dict(zip(names, inputs, strict=True))
    if variant == "init":
        first = names[0]
        graph.initializer.append(numpy_helper.from_array(feeds.pop(first), first))
        del graph.input[0]
    elif variant != "inputs":
        raise ValueError(f"unknown variant {variant!r}")
    return model, feeds


def decline_for(case: str, variant: str, level: str) -> Decline | None:
    """The DECLINES entry for one run, if any."""
    return next((d for d in DECLINES if d.case == case and d.variant == variant and level in d.levels), None)


def raised_ops(case: Case, variant: str) -> list[str]:
    """The `emb` ops the importer makes of `case` in `variant` (empty when it stays a host op)."""
    from ember.frontends.onnx import import_onnx  # noqa: PLC0415  (the doc script needs ember only here)

    model, _ = variant_model(case, variant, case.data_sets[0][0])
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "case.onnx")
        onnx.save(model, path)
        module = import_onnx(path, path)
    return sorted({op.name for op in module.walk() if op.name.startswith("emb.")})


def render() -> str:
    """docs/conformance.md."""
    cases = backend_cases()
    runs_per_case = len(VARIANTS) * len(LEVELS)
    per_op = Counter(c.op for c in cases)
    op_of = {c.name: c.op for c in cases}
    declined = Counter(op_of[d.case] for d in DECLINES if not d.is_bug for _ in d.levels)
    bugs = Counter(op_of[d.case] for d in DECLINES if d.is_bug for _ in d.levels)
    raised = [(c.name, v, kinds) for c in cases for v in VARIANTS if (kinds := raised_ops(c, v))]
    lines = [
        "# ONNX backend conformance",
        "",
        "<!-- Generated by `python tests/gen_conformance_doc.py`; edit the table there, not here. -->",
        "",
        f"`tests/test_onnx_conformance.py` runs the node test cases that the `onnx` package (here "
        f"{onnx.__version__}) ships for {', '.join(f'`{o}`' for o in OPS)}. It uses "
        "`onnx.backend.test.case.node.collect_testcases` and keeps the single-node models; the `_expanded` "
        "function bodies of other operators are left out. Each case is imported, compiled at "
        f"{', '.join(f'`{lv}`' for lv in LEVELS)} and simulated on the case's inputs. Every output must "
        "match the case's expected output: same shape and dtype, integers exact, and floats within "
        "rtol 1e-5 and atol 1e-6.",
        "",
        "Each case runs in two variants:",
        "",
        *(f"- `{name}`: {text}." for name, text in VARIANTS.items()),
        "",
        "As shipped, each case is a lone node on graph inputs. The importer raises a node to an `emb` op "
        "only in the forms that embedding and message-passing models take (see `ember/frontends/onnx/rows.py`): "
        "a `Gather(axis=0)` of a float initializer or of 2-D float rows, or a `GatherND` or scatter whose "
        "indices are an `Unsqueeze` of a 1-D index. Other nodes stay `host.onnx` ops, run by "
        "`onnx.reference`. On those, the runs check the host path: attribute and operand import, element "
        "types, empty tensors, and weights carried into the binary.",
        "",
        "Runs whose node the importer raises to an `emb` op, and so lowers, decouples and simulates:",
        "",
        *(f"- `{name}` (`{variant}`): {', '.join(f'`{k}`' for k in kinds)}" for name, variant, kinds in raised),
        "",
        "## Runs per operator",
        "",
        f"A run is one case in one variant at one level: {runs_per_case} runs a case.",
        "",
        "| operator | cases | runs | expected to pass | declined | known bugs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for op in OPS:
        n = per_op[op] * runs_per_case
        lines.append(f"| `{op}` | {per_op[op]} | {n} | {n - declined[op] - bugs[op]} | {declined[op]} | {bugs[op]} |")
    total = len(cases) * runs_per_case
    nd, nb = sum(declined.values()), sum(bugs.values())
    lines += [f"| total | {len(cases)} | {total} | {total - nd - nb} | {nd} | {nb} |", "", "## Cases", ""]
    for op in OPS:
        lines.append(f"- `{op}`: " + ", ".join(f"`{c.name}`" for c in cases if c.op == op))
    lines += [
        "",
        "## Declined runs and known bugs",
        "",
        "Each of these runs is marked `xfail(strict=True)`. It must raise `EmberError` with a message "
        "that matches the pattern shown. A run that starts to pass, or that fails in some other way, "
        "fails the test, so the table has to be updated. A reason that starts with `BUG:` marks a "
        "defect that still has to be fixed, not a deliberate refusal.",
        "",
    ]
    if not DECLINES:
        lines.append("There are none: every run is expected to pass.")
        return "\n".join(lines) + "\n"
    lines += ["| case | variant | levels | error matches | reason |", "|---|---|---|---|---|"]
    for d in DECLINES:
        pattern = d.error.replace("|", "\\|")
        lines.append(f"| `{d.case}` | `{d.variant}` | {', '.join(d.levels)} | `{pattern}` | {d.reason} |")
    return "\n".join(lines) + "\n"


def check_table() -> None:
    """Every DECLINES entry names a collected case, a known variant and known levels."""
    names = {c.name for c in backend_cases()}
    for d in DECLINES:
        if d.case not in names or d.variant not in VARIANTS or not set(d.levels) <= set(LEVELS):
            raise ValueError(f"stale or mistyped DECLINES entry: {d}")
        re.compile(d.error)


def main() -> None:
    check_table()
    DOC.write_text(render())
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
