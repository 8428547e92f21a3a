"""The error a frontend raises for an archive only torch can read, apart from the frontends' registry so that
the readers that raise it need not import the registry that imports them."""

from __future__ import annotations

from ..ir.diagnostics import EmberError


class NeedsTorch(EmberError):
    """The archive holds TorchScript this reader cannot follow: a scripted module (no traced inputs,
    control flow).  `ember-import` then reads it with torch (ember.frontends.scripted), when installed.

    `reason` says what was met; `inputs` maps forward's parameters to the (shape, dtype) they were
    traced with, when the archive records them (a traced model that calls scripted code)."""

    def __init__(self, reason: str, path: str, inputs: dict[str, tuple[tuple[int, ...], str]] | None = None):
        super().__init__(f"{reason}; Ember reads such archives with torch: install it with "
                         "pip install 'ember[torch]' and run ember-import", path)
        self.reason = reason
        self.inputs = inputs
