"""One error type for everything a user can get wrong, printed as `file:line:col: error: msg`.

Every stage raises `EmberError`; the command-line layer prints it on one line (plus a caret
snippet where source text exists) and exits with status 1, so no user ever sees a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in a source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class EmberError(Exception):
    """A user-facing error: a message, where it happened, and optionally the source line."""

    def __init__(self, message: str, where: Loc | str | None = None, source_line: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.source_line = source_line

    def render(self) -> str:
        head = f"{self.where}: error: {self.message}" if self.where else f"error: {self.message}"
        if self.source_line is not None and isinstance(self.where, Loc):
            line, col = _window(self.source_line.rstrip(), self.where.col)
            return f"{head}\n{line}\n{' ' * (col - 1)}^"
        return head

    def __str__(self) -> str:
        return self.render()


SNIPPET = 120  # characters of a long source line shown around the caret (a line may be a megabyte long)


def _window(line: str, col: int) -> tuple[str, int]:
    """At most SNIPPET characters of `line` around column `col`, marked with ... where cut, and the column there."""
    if len(line) <= SNIPPET:
        return line, col
    start = max(0, min(col - 1 - SNIPPET // 2, len(line) - SNIPPET))
    shown = ("..." if start else "") + line[start:start + SNIPPET] + ("..." if start + SNIPPET < len(line) else "")
    return shown, col - start + (3 if start else 0)
