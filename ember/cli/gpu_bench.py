"""ember-gpu-bench: measure the GPU baseline of `ember-bench --vs-gpu` on the GPU of this machine."""

from __future__ import annotations

import json

import click

from ..bench.gpu import KERNELS, model_case
from ..ir.diagnostics import EmberError
from .common import command, guarded, write_output
from .sim import load_inputs

OPS = ("embedding_bag", "spmm")


@click.command(**command("ember-gpu-bench"))
@click.option("-o", "--output", "out", required=True, metavar="FILE.json",
              help="where to write the measurements (the format of ember/bench/data/gpu_h100_torch.json)")
@click.option("--ops", default=",".join(OPS), show_default=True, metavar="OP,...",
              help="which operators to measure: embedding_bag (D x pooling x Zipf, a 4M-row table), spmm (the SNAP "
                   "graphs), or none (only the --model files)")
@click.option("--model", "models", multiple=True, metavar="FILE.pt2[:INPUTS.npz]",
              help="also time this end-to-end model, exported with torch.export, on its inputs (default: NAME.in.npz "
                   "beside it, NAME being the file name up to its first dot); repeatable")
@click.option("--kernels", default=",".join(KERNELS), show_default=True, metavar="K,...",
              help="embedding_bag implementations to time: torch (PyTorch's operator), triton (a fused Triton "
                   "kernel, its block sizes tuned per shape); --vs-gpu keeps the faster of each case")
@click.option("--reps", default=30, show_default=True, help="timed runs of each case (the median is reported)")
@click.option("--power-seconds", default=1.0, show_default=True,
              help="seconds each case runs in a loop while NVML reads board power (0: no power reading)")
@click.option("--table-rows", default=4_000_000, show_default=True, hidden=True)
@click.option("--device", default="cuda", show_default=True, hidden=True)
@click.option("-q", "--quiet", is_flag=True, help="no progress lines")
@guarded("ember-gpu-bench")
def main(out: str, ops: str, models: tuple[str, ...], kernels: str, reps: int, power_seconds: float,
         table_rows: int, device: str, quiet: bool) -> None:
    """Time PyTorch's embedding_bag, a fused Triton embedding-bag kernel and PyTorch's CSR SpMM on this
    machine's GPU, on the inputs the benchmark's seeded generators make (the same indices
    `ember-bench --vs-gpu` gives the DAE machine), and any end-to-end model given with --model, whole
    forward passes on its own inputs (`ember-bench --vs-gpu --model` runs the same file on the DAE
    servers).

    Each case is timed with CUDA events (median of --reps runs after warm-up). Board power is NVML's
    median reading while the case runs in a loop, with the idle power read first; it needs the
    nvidia-ml-py package and is left out without it. The output holds the GPU, driver, CUDA and
    torch versions and the date. Install the extra with: pip install 'ember[gpu]'.

    \b
      ember-gpu-bench -o gpu_mine.json --model samples/models/dlrm.pt2
      ember-bench --vs-gpu --suite paper --timing-only --gpu-data gpu_mine.json \
          --model samples/models/dlrm.pt2
    """
    from ..bench.gpu import TorchBackend, cases, measure, with_copy_share

    chosen = [] if ops.strip() == "none" else _choose(ops, OPS, "operator", "--ops")
    if not chosen and not models:
        raise EmberError("nothing to measure: --ops none and no --model")
    impls = _choose(kernels, KERNELS, "kernel", "--kernels")
    if reps < 1 or power_seconds < 0 or table_rows < 1:
        raise EmberError("--reps and --table-rows must be at least 1, --power-seconds at least 0")
    backend = TorchBackend(device, impls if "embedding_bag" in chosen else ())
    todo = [*cases(chosen, table_rows, kernels=impls), *(model_case(m, load_inputs) for m in models)]
    doc = measure(backend, todo, reps, power_seconds,
                  progress=lambda label: None if quiet else click.echo(f"ember-gpu-bench: {label}", err=True))
    write_output(out, json.dumps(with_copy_share(doc), indent=1) + "\n")


def _choose(given: str, valid: tuple[str, ...], what: str, option: str) -> list[str]:
    """The comma-separated names of `given`, each one of `valid`."""
    chosen = [o.strip() for o in given.split(",") if o.strip()]
    bad = [o for o in chosen if o not in valid]
    if bad or not chosen:
        raise EmberError(f"unknown {what} '{(bad or [given])[0]}' in {option} (valid: {', '.join(valid)})")
    return chosen


if __name__ == "__main__":
    main()
