"""The GPU baseline's hand-written kernel: a fused EmbeddingBag in Triton.

PyTorch's `embedding_bag` is one GPU implementation; an expert trying to beat the DAE machine would also
write the obvious fused kernel and keep whichever is faster, so `ember-gpu-bench` times both.  One program
reduces one bag over one block of columns: it loads a block of the bag's indices at once, gathers that
many rows x BLOCK_D columns in one masked load (many rows in flight per program, which is what an
irregular gather needs to cover HBM latency) and accumulates in float32.  The block sizes are picked per
shape by timing a few candidates on the device, as Triton's autotuner would.

Off a GPU the kernel runs in Triton's interpreter (numpy underneath), which is how the tests check it
against numpy.  Triton decides between compiling and interpreting when it is imported (its own library
functions are jitted then), so the interpreter is on only in a process started with TRITON_INTERPRET=1.
"""

from __future__ import annotations

import os
from typing import Any

MODES = {"sum": 0, "mean": 1, "max": 2}
# (BLOCK_N indices, BLOCK_D columns, warps): the candidates timed per shape; BLOCK_D is capped at D's power of 2
CONFIGS = ((16, 64, 2), (16, 128, 4), (32, 128, 4), (32, 256, 8), (64, 64, 4))


try:  # the gpu extra; without it `available()` says so and nothing below runs
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None


def _bag(table, indices, offsets, out, dim, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,  # noqa: N803
         MODE: tl.constexpr):  # noqa: N803
    """One bag (program_id 0) over one block of columns (program_id 1)."""
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_row = cols < dim
    start = tl.load(offsets + b)
    end = tl.load(offsets + b + 1)
    if MODE == 2:
        acc = tl.full((BLOCK_D,), float("-inf"), tl.float32)
    else:
        acc = tl.zeros((BLOCK_D,), tl.float32)
    for j in range(start, end, BLOCK_N):
        k = j + tl.arange(0, BLOCK_N)
        in_bag = k < end
        rows = tl.load(indices + k, mask=in_bag, other=0).to(tl.int64)
        where = table + rows[:, None] * dim + cols[None, :]
        both = in_bag[:, None] & in_row[None, :]
        if MODE == 2:
            acc = tl.maximum(acc, tl.max(tl.load(where, mask=both, other=float("-inf")), axis=0))
        else:
            acc += tl.sum(tl.load(where, mask=both, other=0.0), axis=0)
    n = end - start
    if MODE == 1:
        acc = acc / tl.maximum(n, 1).to(tl.float32)
    if MODE == 2:
        acc = tl.where(n > 0, acc, 0.0)  # an empty bag is zeros, as in torch.nn.functional.embedding_bag
    tl.store(out + b * dim + cols, acc, mask=in_row)


bag = None if triton is None else triton.jit(_bag)


def available(device: str) -> str | None:
    """None, or why the Triton kernel cannot run here."""
    if triton is None:
        return "the Triton kernel needs triton, which is not installed: pip install 'ember[gpu]'"
    if device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return f"the Triton kernel runs on a CUDA device, or on '{device}' only under TRITON_INTERPRET=1"
    return None


def embedding_bag(table: Any, indices: Any, offsets: Any, mode: str = "sum",
                  config: tuple[int, int, int] = CONFIGS[1]) -> Any:
    """torch.nn.functional.embedding_bag(indices, table, offsets, mode, include_last_offset=True), fused:
    `offsets` has one entry more than there are bags.  Tensors on a CUDA device run compiled; on the CPU,
    interpreted."""
    import torch

    bags, dim = offsets.numel() - 1, table.shape[1]
    block_n, block_d, warps = config
    block_d = min(block_d, triton.next_power_of_2(dim))
    out = torch.empty((bags, dim), dtype=torch.float32, device=table.device)
    grid = (bags, triton.cdiv(dim, block_d))
    extra = {"num_warps": warps} if table.device.type == "cuda" else {}
    bag[grid](table.contiguous(), indices.contiguous(), offsets.contiguous(), out, dim, BLOCK_N=block_n,
                 BLOCK_D=block_d, MODE=MODES[mode], **extra)
    return out
