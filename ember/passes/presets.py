"""The pipelines the -O levels, the published study's ladder and `--target=core` name (plain text, so a pass
that plans for what runs after it can read them without importing the registry)."""

from __future__ import annotations

_O1 = "lower-emb,decouple,vectorize,to-dlc,codegen"
_O2 = "lower-emb,decouple,vectorize,bufferize,to-dlc,codegen"
PRESETS: dict[str, str] = {
    "O0": "lower-emb,decouple,to-dlc,codegen",
    "O1": _O1,
    "O2": _O2,
    # choose-plan first: an operation is decoupled and optimized only where a static estimate says it pays
    "O3": "lower-emb,choose-plan,decouple,vectorize,unroll,bufferize,hoist,simplify-mem,promote-accumulators,"
          "prefetch-outputs,align-queues,init-ahead,prefetch-indices,to-dlc,codegen",
    # the published study's ladder (vectorization, bufferization, queue alignment, code motion), kept as
    # its own presets so its figures stay reproducible: paper-O1 and paper-O2 are -O1 and -O2
    "paper-O1": _O1,
    "paper-O2": _O2,
    "paper-O3": "lower-emb,decouple,vectorize,bufferize,align-queues,simplify-mem,init-ahead,to-dlc,codegen",
    "core": "lower-emb,vectorize,simplify-mem,codegen",  # --target=core: every loop nest on the execute unit
}
