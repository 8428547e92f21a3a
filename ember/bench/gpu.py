"""`ember-gpu-bench`: measure the GPU side of `ember-bench --vs-gpu` on whatever GPU is present.

It times the cases the shipped `data/gpu_h100_torch.json` holds: `embedding_bag` (sum, f32, one 4M-row
table) over D x pooling x Zipf, and a CSR SpMM over each SNAP graph.  Each embedding_bag case is timed
twice, with PyTorch's operator and with a fused Triton kernel (`triton_bag`); the comparison keeps the
faster.  The inputs come from the benchmark's own seeded generators (`Workload.inputs`), so the DAE
twins of `--vs-gpu` run on the very same indices.  Times are CUDA-event medians after warm-up; board
power is NVML's reading while the kernel runs in a loop, with the idle power read first.  The output is
the shipped file's format plus what was measured about the run (driver, CUDA, date) and per row
`power_w`, `idle_power_w` and every time.

A `Backend` does the device work, so the whole tool runs on the CPU in tests (`TorchBackend("cpu")` or a
fake): the timing and power parts are the only CUDA-specific lines.
"""

from __future__ import annotations

import datetime
import logging
import statistics
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..ir.diagnostics import EmberError
from .workloads import GRAPHS, MP_FEATURES, Workload

TABLE_ROWS = 4_000_000
DIMS = (32, 64, 128, 256)
SHAPES = ((1, 65_536), (20, 4_096), (80, 4_096))  # (pooling, batch)
ZIPFS = (0.0, 0.8, 1.05)
KERNELS = ("torch", "triton")


@dataclass(frozen=True)
class Case:
    """One measured case: an embedding_bag shape, or an SpMM over a graph."""

    op: str
    workload: Workload
    kernel: str = "torch"  # "torch" (PyTorch's operator) or "triton" (triton_bag's fused kernel)

    def label(self) -> str:
        w = self.workload
        return f"spmm {w.graph} F={w.dim}" if self.op == "spmm" else \
            f"embedding_bag[{self.kernel}] D={w.dim} pool={w.pooling} zipf={w.zipf:g}"


def cases(ops: Iterable[str] = ("embedding_bag", "spmm"), table_rows: int = TABLE_ROWS,
          graphs: Iterable[str] = tuple(GRAPHS), kernels: Iterable[str] = KERNELS) -> list[Case]:
    """The shipped file's grid, each embedding_bag case once per kernel; `table_rows` and `graphs` shrink it for
    a quick check."""
    out = []
    if "embedding_bag" in ops:
        for dim in DIMS:
            for pooling, batch in SHAPES:
                for zipf in ZIPFS:
                    w = Workload(f"bag_D{dim}_p{pooling}_z{zipf:g}", "bag_sum", 1, table_rows, dim, pooling, batch,
                                 zipf)
                    out += [Case("embedding_bag", w, k) for k in kernels]
    if "spmm" in ops:
        for g in graphs:
            nodes, edges = GRAPHS[g]
            degree = max(1, round(edges / nodes))  # as the suite's MP workloads: the whole graph, every node a bag
            out.append(Case("spmm", Workload(f"spmm_{g}", "bag_sum", 1, nodes, MP_FEATURES, degree, nodes, 0.9,
                                             graph=g)))
    return out


@dataclass(frozen=True)
class ModelCase:
    """An end-to-end model exported with torch.export (a `.pt2` file), timed whole on its own inputs."""

    name: str
    file: str
    feeds: dict[str, np.ndarray] = field(compare=False)  # one array per model input, by name
    op: str = "model"

    def label(self) -> str:
        return f"model {self.name}"

    def shapes(self) -> dict[str, list[int]]:
        """Each input's shape: a GPU row is compared only with a DAE run on inputs of the same shapes."""
        return {k: list(v.shape) for k, v in self.feeds.items()}


def model_case(spec: str, load: Callable[[str], dict[str, np.ndarray]]) -> ModelCase:
    """`FILE[:INPUTS.npz]` (the inputs default to NAME.in.npz beside the file, NAME being its name up to the
    first dot, as samples/models names them), the inputs read with `load` now, before any run."""
    file, sep, inputs = spec.rpartition(":")
    if not sep or not inputs.endswith(".npz"):  # a colon inside the file's own path
        file, inputs = spec, ""
    name = Path(file).name.split(".")[0]
    if not Path(file).is_file():
        raise EmberError("no such model file", file)
    return ModelCase(name, file, load(inputs or str(Path(file).with_name(f"{name}.in.npz"))))


class Backend(Protocol):
    """Where kernels run and how they are timed."""

    def available(self) -> str | None:
        """None, or the one-line reason no measurement can be made."""

    def describe(self) -> dict[str, str]:
        """device, driver, torch and cuda versions."""

    def prepare(self, case: Case, inputs: dict[str, np.ndarray], table: np.ndarray) -> Callable[[], Any]:
        """The case's kernel, with its data on the device; calling it runs it once and returns the output."""

    def prepare_model(self, case: ModelCase) -> Callable[[], Any]:
        """The model's forward pass, weights and inputs on the device; calling it runs it once."""

    def times(self, fn: Callable[[], Any], reps: int) -> list[float]:
        """Seconds of each of `reps` runs after warm-up."""

    def power_w(self, fn: Callable[[], Any], seconds: float) -> tuple[float | None, float | None]:
        """(board power while `fn` runs in a loop, idle power before), or Nones without a power sensor."""

    def copy_gbps(self) -> float:
        """The device's own copy bandwidth: bytes read plus written a second, for a large copy."""


class TorchBackend:
    """PyTorch's operators and the Triton kernel on `device` ("cuda", or "cpu" for tests); NVML for power on
    CUDA."""

    def __init__(self, device: str = "cuda", kernels: Iterable[str] = KERNELS):
        self.device, self.kernels = device, tuple(kernels)
        try:
            import torch
        except ImportError:
            self.torch = None
        else:
            self.torch = torch

    def available(self) -> str | None:
        if self.torch is None:
            return "needs PyTorch with CUDA, which is not installed: pip install 'ember[gpu]'"
        if self.device == "cuda" and not self.torch.cuda.is_available():
            return "no CUDA device (torch.cuda.is_available() is False); nothing measured"
        if "triton" in self.kernels:
            from . import triton_bag  # imports triton, which only the gpu extra installs

            return triton_bag.available(self.device)
        return None

    def describe(self) -> dict[str, str]:
        t = self.torch
        assert t is not None
        if self.device != "cuda":
            return {"device": f"{self.device} (torch)", "driver": "", "torch": t.__version__, "cuda": ""}
        return {"device": t.cuda.get_device_name(0), "driver": _nvml(lambda n, h: n.nvmlSystemGetDriverVersion()) or "",
                "torch": t.__version__, "cuda": str(t.version.cuda)}

    def prepare(self, case: Case, inputs: dict[str, np.ndarray], table: np.ndarray) -> Callable[[], Any]:
        t = self.torch
        assert t is not None
        x = t.from_numpy(table).to(self.device)
        idx = t.from_numpy(inputs["indices"]).to(self.device)
        off = t.from_numpy(inputs["offsets"]).to(self.device)
        if case.op == "spmm":
            values = t.ones(len(idx), dtype=t.float32, device=self.device)
            with warnings.catch_warnings():  # "CSR support is in beta": the operator is what is measured
                warnings.simplefilter("ignore", UserWarning)
                adj = t.sparse_csr_tensor(off, idx, values, size=(len(off) - 1, table.shape[0]),
                                          check_invariants=False)
            return lambda: t.sparse.mm(adj, x)
        torch_bag = lambda: t.nn.functional.embedding_bag(idx, x, off, mode="sum", include_last_offset=True)  # noqa: E731
        if case.kernel == "triton":
            from . import triton_bag

            want = torch_bag()
            candidates = [triton_bag.launcher(x, idx, off, "sum", c) for c in triton_bag.CONFIGS]
            for c, fn in zip(triton_bag.CONFIGS, candidates, strict=True):
                if not t.allclose(fn(), want, rtol=1e-4, atol=1e-4):  # never time a kernel that computes wrong
                    raise EmberError(f"the Triton kernel with blocks {c} differs from PyTorch's embedding_bag "
                                     f"on {case.label()}")
            return self.fastest(candidates)
        return torch_bag

    def prepare_model(self, case: ModelCase) -> Callable[[], Any]:
        t = self.torch
        assert t is not None
        quiet = logging.getLogger("torch")  # torch logs a traceback of its own before raising on a foreign file
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            program = t.export.load(case.file)
        except Exception as e:  # torch raises many kinds on a file that is not an export archive
            why = " ".join(str(e).split())[:200]
            raise EmberError(f"not a torch.export archive ({type(e).__name__}: {why})", case.file) from None
        finally:
            quiet.setLevel(level)
        order = [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        missing = [n for n in order if n not in case.feeds]
        if missing:
            raise EmberError(f"the inputs have no array '{missing[0]}' (the model's inputs: {', '.join(order)})",
                             case.file)
        # devices recorded in the graph (a model exported on the CPU) move too, not only the weights
        from torch.export.passes import move_to_device_pass

        module = move_to_device_pass(program, self.device).module()
        args = [t.from_numpy(case.feeds[n]).to(self.device) for n in order]

        def forward() -> Any:
            with t.inference_mode():  # as a server runs it: no autograd records kept
                return module(*args)

        try:
            forward()
        except Exception as e:  # the model's own error on these inputs (a dtype, a shape)
            why = " ".join(str(e).split())[:200]
            raise EmberError(f"the model does not run on its inputs ({type(e).__name__}: {why})", case.file) from None
        return forward

    def fastest(self, candidates: list[Callable[[], Any]], reps: int = 5) -> Callable[[], Any]:
        """The candidate with the lowest median time: the Triton kernel's block sizes, tuned per shape."""
        return min(candidates, key=lambda fn: statistics.median(self.times(fn, reps)))

    def times(self, fn: Callable[[], Any], reps: int) -> list[float]:
        t = self.torch
        assert t is not None
        for _ in range(3):
            fn()
        if self.device != "cuda":
            out = []
            for _ in range(reps):
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
            return out
        t.cuda.synchronize()
        events = [(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for a, b in events:
            a.record()
            fn()
            b.record()
        t.cuda.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in events]

    def power_w(self, fn: Callable[[], Any], seconds: float) -> tuple[float | None, float | None]:
        if self.device != "cuda":
            return None, None
        t = self.torch
        assert t is not None
        idle = _nvml(lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1e3)
        if idle is None:
            return None, None
        readings: list[float] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(20):
                fn()
            reading = _nvml(lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1e3)
            if reading is not None:
                readings.append(reading)
        t.cuda.synchronize()
        return (statistics.median(readings) if readings else None), idle

    def copy_gbps(self) -> float:
        t = self.torch
        assert t is not None
        src = t.empty(1 << 28, dtype=t.uint8, device=self.device)  # 256 MiB
        dst = t.empty_like(src)
        best = min(self.times(lambda: dst.copy_(src), 10))
        return 2 * src.numel() / best / 1e9


def _nvml(read: Callable[[Any, Any], Any]) -> Any:
    """One NVML reading of device 0, or None when NVML (the nvidia-ml-py package) or the sensor is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        value = read(pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        return value.decode() if isinstance(value, bytes) else value
    except pynvml.NVMLError:
        return None


def measure(backend: Backend, chosen: list[Case | ModelCase], reps: int = 30, power_seconds: float = 1.0,
            progress: Callable[[str], None] = lambda label: None) -> dict[str, Any]:
    """Every case on `backend`: the document `load_gpu_baseline` reads, with the run's own facts."""
    reason = backend.available()
    if reason is not None:
        raise EmberError(reason)
    rows: list[dict[str, Any]] = []
    made: tuple[Workload, dict[str, np.ndarray], np.ndarray] | None = None
    for case in chosen:
        progress(case.label())
        if isinstance(case, ModelCase):
            fn = backend.prepare_model(case)
            times = backend.times(fn, reps)
            power, idle = backend.power_w(fn, power_seconds)
            rows.append({"op": "model", "model": case.name, "file": case.file, "inputs": case.shapes(),
                         "time_s": statistics.median(times), "times_s": times, "power_w": power, "idle_power_w": idle})
            continue
        w = case.workload
        if made is None or made[0] != w:  # the kernels of one shape share its inputs and table
            rng = np.random.default_rng(w.seed)
            made = (w, w.inputs(0), rng.standard_normal((w.rows, w.dim), dtype=np.float32))
        _, inputs, table = made
        fn = backend.prepare(case, inputs, table)
        times = backend.times(fn, reps)
        median = statistics.median(times)
        power, idle = backend.power_w(fn, power_seconds)
        rows.append(_row(case, inputs, median, times, power, idle))
    return {**backend.describe(), "copy_GBps": backend.copy_gbps(), "tool": "ember-gpu-bench",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "rows": rows}


def _row(case: Case, inputs: dict[str, np.ndarray], median: float, times: list[float], power: float | None,
         idle: float | None) -> dict[str, Any]:
    w = case.workload
    indices, offsets = inputs["indices"], inputs["offsets"]
    bags = len(offsets) - 1
    unique = int(len(np.unique(indices)))
    # useful bytes as the shipped file counts them: indices, offsets, the output, and the rows gathered (each
    # distinct row once for embedding_bag; every edge's row, and its value, for spmm)
    moved = indices.nbytes + offsets.nbytes + bags * w.dim * 4
    moved += len(indices) * (w.dim + 1) * 4 if case.op == "spmm" else unique * w.dim * 4
    row: dict[str, Any] = {"op": case.op}
    if case.op == "spmm":
        row.update(graph=w.graph, nodes=w.rows, nnz=len(indices), F=w.dim, edges_per_s=len(indices) / median)
    else:
        row.update(kernel=case.kernel, D=w.dim, pool=w.pooling, batch=w.bags, zipf=w.zipf, mode="sum", rows=w.rows,
                   lookups=len(indices), unique_rows=unique, lookups_per_s=len(indices) / median)
    row.update(time_s=median, GBps=moved / median / 1e9, times_s=times, power_w=power, idle_power_w=idle)
    return row


def with_copy_share(doc: dict[str, Any]) -> dict[str, Any]:
    """Each row's share of the device's copy bandwidth, as the shipped file has it."""
    for r in doc["rows"]:
        if "GBps" in r:  # an end-to-end model's row has no one byte count to compare
            r["frac_copy_bw"] = r["GBps"] / doc["copy_GBps"]
    return doc
