"""One group-by over the storages: the totals, the per-module table and the per-modality table.

Every storage is attributed to a module (parameters: their owner; gradients and optimizer state:
their parameter's owner; activations and temporaries: the module running when they were made),
and a group key is a function of that module path. Rows add up to the totals by construction.
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from typing import Callable

import torch

from memgraph.analysis.result import ModuleRow, Totals
from memgraph.trace.event_log import Category, EventLog


@lru_cache(maxsize=None)
def itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def group_by(log: EventLog, sizes: list[int], key: Callable[[str], str], alive: set[int], trainable: set[int],
             last_iteration: int) -> dict[str, Totals]:
    """Totals per ``key(module path)``.

    gradients: the last iteration's, or alive at the end (kept by --zero-grad zero/none); optimizer state: what is still held at the end; saved
    activations: saved for backward in the last iteration's forward; peak: alive in ``alive``.
    """
    out: dict[str, Totals] = {}
    for sid, s in enumerate(log.storages):
        k = key(s.module)
        row = out.get(k)
        if row is None:
            row = out[k] = Totals()
        size, cat = sizes[sid], s.category
        if cat == Category.PARAMETER:
            numel = s.nbytes // max(itemsize(s.dtype), 1)
            row.parameters += numel
            row.parameter_bytes += size
            if sid in trainable:
                row.trainable_parameters += numel
        elif cat == Category.BUFFER:
            row.buffer_bytes += size
        elif cat == Category.GRADIENT and (s.iteration == last_iteration or s.free_event is None):
            row.gradient_bytes += size
        elif cat == Category.OPTIMIZER_STATE and s.free_event is None:
            row.optimizer_state_bytes += size
        if s.saved_for_backward and s.phase == "forward" and s.iteration == last_iteration:
            row.saved_activation_bytes += size
        if sid in alive:
            row.peak_bytes += size
    return out


def add(a: Totals, b: Totals) -> Totals:
    return Totals(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(Totals)})


def prefix(path: str, depth: int) -> str:
    """The module path cut to ``depth`` parts ("" is the model's top level)."""
    return ".".join(path.split(".")[:depth]) if path else ""


def module_order(path: str) -> tuple:
    """Sort module paths with numeric parts as numbers (layers.2 before layers.10)."""
    parts = path.split(".") if path else []
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def module_rows(by_module: dict[str, Totals]) -> list[ModuleRow]:
    return [ModuleRow(module=m, **vars_of(t)) for m, t in sorted(by_module.items(), key=lambda kv: module_order(kv[0]))]


def at_depth(rows: list[ModuleRow], depth: int) -> list[ModuleRow]:
    """Module rows summed up to module paths of at most ``depth`` parts (the renderers' ``--depth``)."""
    merged: dict[str, Totals] = {}
    for r in rows:
        k = prefix(r.module, depth)
        merged[k] = add(merged[k], r) if k in merged else Totals(**vars_of(r))
    return module_rows(merged)


def vars_of(t: Totals) -> dict[str, int]:
    return {f.name: getattr(t, f.name) for f in fields(Totals)}
