"""Where a running analysis is, for a progress line and for ``--timeout``'s message.

The tracer registers the event log it is filling (:func:`watch`); readers ask :func:`position` at any
time (from a display thread, or from a signal handler) and get the stage, iteration, phase, module and op
of the newest recorded op. Nothing here is on the recording path: the log is only read.
"""

from __future__ import annotations

import time

_state = {"stage": "starting", "log": None, "since": time.monotonic()}


def stage(name: str) -> None:
    """The stage the analysis entered: "building the model", "tracing", "analysing", ..."""
    _state["stage"] = name
    _state["since"] = time.monotonic()


def watch(log) -> None:
    """The event log the tracer is filling now (None when it is done)."""
    _state["log"] = log


def activity() -> tuple:
    """Changes whenever the analysis moves on: (stage, when it began, ops recorded so far)."""
    log = _state["log"]
    return _state["stage"], _state["since"], len(log.ops) if log is not None else 0


def position(short: bool = False) -> str:
    """e.g. ``tracing: iteration 1, backward, model.layers.3.mlp, aten.mm.default (12,345 ops)``."""
    where = _state["stage"]
    log = _state["log"]
    ops = log.ops if log is not None else None
    if not ops:
        return where
    last = ops[-1]
    if short:
        return f"{where}: iteration {last.iteration}, {last.phase}, {len(ops):,} ops"
    return (f"{where}: iteration {last.iteration}, {last.phase}, module {last.module or '(top level)'}, "
            f"op {last.op} ({len(ops):,} ops traced)")
