"""The names Ember's MLIR form gives to what MLIR lacks, shared by its printer and its reader.

MLIR needs a dialect on every op and on every attribute of `builtin.module`, has no unsigned `u8`, no stream
type, no vector of unknown shape, and no value name that starts with a digit unless it is all digits; each
mapping here is one-to-one, so a module printed as MLIR reads back as the same module.
"""

from __future__ import annotations

import re

DIALECT = "ember"  # the dialect of Ember's dialect-less ops (func, return, param, work) and of module attributes
MODULE = "builtin.module"
STREAM = "!slc.stream"  # stream<T>: the original Ember's own spelling of its stream type
VECTOR = "!ember.vector"  # a vector<...> with a dynamic or unknown shape, which MLIR's vector type cannot have
DENSE = "#ember.dense"  # a dense attribute MLIR's `dense<...>` cannot hold as written (see mlir_print.dense)

SCALAR_TO_MLIR = {"u8": "ui8"}
SCALAR_FROM_MLIR = {v: k for k, v in SCALAR_TO_MLIR.items()}

# MLIR's value names (suffix-id) less those starting with '$', which mark an escaped Ember name
_PLAIN_NAME = re.compile(r"[0-9]+|[A-Za-z_.-][A-Za-z0-9_.$-]*")


def op_name(name: str) -> str:
    """An Ember op's MLIR name: dialect-less ops join the `ember` dialect."""
    return name if "." in name else f"{DIALECT}.{name}"


def ember_op_name(name: str) -> str:
    """The inverse of op_name."""
    rest = name.removeprefix(DIALECT + ".")
    return rest if rest != name and "." not in rest else name


def value_name(name: str) -> str:
    """An Ember value name as MLIR accepts it: unchanged, or behind a '$' where MLIR would refuse it (`1a`) or it
    starts with '$' itself."""
    return name if _PLAIN_NAME.fullmatch(name) else "$" + name


def ember_value_name(name: str) -> str:
    """The inverse of value_name."""
    return name[1:] if name.startswith("$") else name
