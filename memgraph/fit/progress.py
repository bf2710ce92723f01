"""``memgraph fit`` on a terminal: one line per finished analysis, above the live progress line.

The live line (memgraph/watch.py) shows where the current trace is; each finished candidate leaves a line
of its own on standard error (``memgraph fit: [3/12] gradient checkpointing: 38.20 GiB, fits (4.1 s,
traced)``), so the table's rows appear as they are computed. Nothing is written when standard error is
piped or redirected, as for the live line.
"""

from __future__ import annotations

import sys

from memgraph.trace.record import progress

ERASE_LINE = "\r\x1b[K"  # carriage return, then ANSI "erase to end of line": the live line goes first


class FitProgress:
    """Where a fit is (:meth:`stage`, for the live line) and what it found (:meth:`done`, a line each)."""

    def __init__(self, stream=None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = (hasattr(self.stream, "isatty") and self.stream.isatty()) if enabled is None else enabled

    def stage(self, text: str) -> None:
        progress.stage(f"fit: {text}")

    def done(self, text: str) -> None:
        if self.enabled:
            self.stream.write(f"{ERASE_LINE}memgraph fit: {text}\n")
            self.stream.flush()


QUIET = FitProgress(enabled=False)
