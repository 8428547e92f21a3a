"""The GPU baseline's hand-written kernel: a fused EmbeddingBag in Triton.

PyTorch's `embedding_bag` is one GPU implementation; an expert trying to beat the DAE machine would also
write the obvious fused kernel and keep whichever is faster, so `ember-gpu-bench` times both.  One program
reduces BLOCK_B bags over one block of BLOCK_D columns: at each step it loads the next BLOCK_N indices of
every one of its bags and gathers those BLOCK_B x BLOCK_N rows in one masked load (many rows in flight per
program, which is what an irregular gather needs to cover HBM latency), adds them into a float32 tile and
reduces the tile once at the end.  Several bags a program serve short bags (a pooling of 1 would otherwise
leave most of a tile masked off); one bag a program serves long ones.  The block sizes, warps and pipeline
stages are picked per shape by timing a few candidates on the device, as Triton's autotuner would, after
each candidate's output is checked against PyTorch's.

Off a GPU the kernel runs in Triton's interpreter (numpy underneath), which is how the tests check it
against numpy.  Triton decides between compiling and interpreting when it is imported (its own library
functions are jitted then), so the interpreter is on only in a process started with TRITON_INTERPRET=1.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

MODES = {"sum": 0, "mean": 1, "max": 2}
# (BLOCK_B bags, BLOCK_N indices, BLOCK_D columns, warps, stages): the candidates timed per shape; BLOCK_D is
# capped at D's power of two.  Each keeps its tile at or under 8,192 floats (64 a thread at 4 warps).
CONFIGS = ((1, 16, 128, 4, 2), (1, 32, 128, 4, 3), (1, 32, 256, 8, 2), (4, 8, 128, 4, 2), (8, 4, 64, 2, 2),
           (16, 1, 128, 4, 2))


try:  # the gpu extra; without it `available()` says so and nothing below runs
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None


def _bag(table, indices, offsets, out, bags, dim, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr,  # noqa: N803
         BLOCK_D: tl.constexpr, MODE: tl.constexpr):  # noqa: N803
    """Bags BLOCK_B * program_id 0 on, over the block of columns program_id 1; offsets into the output are
    64-bit (bags x D passes 2^31 at a large batch)."""
    bs = tl.program_id(0).to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)
    in_batch = bs < bags
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_row = cols < dim
    start = tl.load(offsets + bs, mask=in_batch, other=0).to(tl.int64)
    end = tl.load(offsets + bs + 1, mask=in_batch, other=0).to(tl.int64)
    n = end - start
    if MODE == 2:
        acc = tl.full((BLOCK_B, BLOCK_N, BLOCK_D), float("-inf"), tl.float32)
    else:
        acc = tl.zeros((BLOCK_B, BLOCK_N, BLOCK_D), tl.float32)
    for j in range(0, tl.max(n, axis=0), BLOCK_N):
        k = start[:, None] + j + tl.arange(0, BLOCK_N)[None, :]
        in_bag = k < end[:, None]
        rows = tl.load(indices + k, mask=in_bag, other=0).to(tl.int64)
        where = table + rows[:, :, None] * dim + cols[None, None, :]
        both = in_bag[:, :, None] & in_row[None, None, :]
        if MODE == 2:
            acc = tl.maximum(acc, tl.load(where, mask=both, other=float("-inf")))
        else:
            acc += tl.load(where, mask=both, other=0.0)
    if MODE == 2:
        result = tl.where(n[:, None] > 0, tl.max(acc, axis=1), 0.0)  # an empty bag is zeros, as in torch
    else:
        result = tl.sum(acc, axis=1)
    if MODE == 1:
        result = result / tl.maximum(n, 1).to(tl.float32)[:, None]
    tl.store(out + bs[:, None] * dim + cols[None, :], result, mask=in_batch[:, None] & in_row[None, :])


bag = None if triton is None else triton.jit(_bag)


def available(device: str) -> str | None:
    """None, or why the Triton kernel cannot run here."""
    if triton is None:
        return "the Triton kernel needs triton, which is not installed: pip install 'ember[gpu]'"
    if device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return f"the Triton kernel runs on a CUDA device, or on '{device}' only under TRITON_INTERPRET=1"
    return None


def launcher(table: Any, indices: Any, offsets: Any, mode: str = "sum",
             config: tuple[int, int, int, int, int] = CONFIGS[0]) -> Callable[[], Any]:
    """A call of the kernel with everything else done beforehand (the output allocated, the inputs made
    contiguous), so that timing it times the kernel: torch.nn.functional.embedding_bag(indices, table,
    offsets, mode, include_last_offset=True), fused, in float32 (the table's rows are read as they are
    stored and added in float32; max ignores NaN).  `offsets` has one entry more than there are bags."""
    import torch

    bags, dim = offsets.numel() - 1, table.shape[1]
    block_b, block_n, block_d, warps, stages = config
    block_d = min(block_d, triton.next_power_of_2(dim))
    out = torch.empty((bags, dim), dtype=torch.float32, device=table.device)
    args = (table.contiguous(), indices.contiguous(), offsets.contiguous(), out, bags, dim)
    grid = (triton.cdiv(bags, block_b), triton.cdiv(dim, block_d))
    extra = {"num_warps": warps, "num_stages": stages} if table.device.type == "cuda" else {}

    def run() -> Any:
        bag[grid](*args, BLOCK_B=block_b, BLOCK_N=block_n, BLOCK_D=block_d, MODE=MODES[mode], **extra)
        return out

    return run


def embedding_bag(table: Any, indices: Any, offsets: Any, mode: str = "sum",
                  config: tuple[int, int, int, int, int] = CONFIGS[0]) -> Any:
    """The kernel run once (`launcher`)."""
    return launcher(table, indices, offsets, mode, config)()
