"""Caps on what an input file can make Ember allocate, so a crafted archive, pickle or host graph is
refused in one line instead of exhausting the machine's memory.

Each cap has a default sized well above any real model Ember imports, and an environment variable
that replaces it (a positive integer).  The variable is read each time the cap is checked, so a
setting takes effect without restarting anything.  docs/frontends.md ("Limits on hostile inputs") lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .ir.diagnostics import EmberError

__all__ = ["ARCHIVE_DEPTH", "ARCHIVE_MEMBER_BYTES", "ARCHIVE_OBJECTS", "ARCHIVE_RATIO", "HOST_MAX_BYTES", "INPUT_BYTES",
           "TEXT_BYTES", "TEXT_ITEMS", "TEXT_LINE_CHARS", "TEXT_LIST_ITEMS", "Limit"]


@dataclass(frozen=True)
class Limit:
    """One cap: its environment variable and its default."""

    env: str
    default: int

    def get(self) -> int:
        text = os.environ.get(self.env, "").strip()
        if not text:
            return self.default
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise EmberError(f"{self.env} must be a positive integer, not '{os.environ[self.env]}'")
        return value


ARCHIVE_MEMBER_BYTES = Limit("EMBER_ARCHIVE_MEMBER_BYTES", 1 << 32)
"""Largest archive member (.pt, .pt2) read, inflated."""
ARCHIVE_RATIO = Limit("EMBER_ARCHIVE_RATIO", 100)
"""Largest inflated/stored ratio of an archive member over 16 MiB, and of all Ember builds from one archive
to the file's size.  torch stores tensor data uncompressed and its pickles and JSON compress about 10x,
so a higher ratio is a decompression bomb, not a model."""
ARCHIVE_OBJECTS = Limit("EMBER_ARCHIVE_OBJECTS", 1_000_000)
"""Most objects one pickle or JSON member of an archive may build, and most objects its contents may
expand to when the reader walks them (a list referenced twice is walked twice): a billion-laughs pickle
shares references to make a few kilobytes stand for billions of objects."""
ARCHIVE_DEPTH = Limit("EMBER_ARCHIVE_DEPTH", 200)
"""Deepest nesting of lists, tuples, dicts and module objects in a pickle or JSON member."""
HOST_MAX_BYTES = Limit("EMBER_HOST_MAX_BYTES", 1 << 32)
"""Largest tensor a host (ONNX) operator may produce."""
INPUT_BYTES = Limit("EMBER_INPUT_BYTES", 1 << 32)
"""Largest binary file a tool reads whole (a .bin program, an .npz of inputs): a device such as /dev/zero, or a
pipe that never ends, is refused at this size instead of filling the memory."""
TEXT_LINE_CHARS = Limit("EMBER_TEXT_LINE_CHARS", 1 << 20)
"""Longest line of a .eir or .dae text, which bounds a string literal as well: real lines are under a few hundred
characters, and the parsers take hundreds of bytes of memory per character of a string."""
TEXT_LIST_ITEMS = Limit("EMBER_TEXT_LIST_ITEMS", 100_000)
"""Most items in one list, dict or parenthesis of a .eir or .dae text (an attribute, a shape, an op's operands): a
list takes the parser about 10 microseconds and 1 kB an item, and real ones have a few."""
TEXT_ITEMS = Limit("EMBER_TEXT_ITEMS", 1_000_000)
"""Most list, dict and parenthesis items in all of one .eir or .dae text (about 10 s of parsing): many lists under
TEXT_LIST_ITEMS each would otherwise add up to minutes and gigabytes."""
TEXT_BYTES = Limit("EMBER_TEXT_BYTES", 1 << 26)
"""Largest text file (.eir, .dae) a tool reads: the parsers need many times a text's size in memory, and the
levels name their weights in the model file, so real ones are kilobytes to megabytes."""
