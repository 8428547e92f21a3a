"""Op definitions, one module per level; importing this package registers all of them."""

from . import builtin, dlc, emb, loop, slc  # noqa: F401
