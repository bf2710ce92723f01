"""One group-by over the storages: the totals, the per-module table and the per-modality table.

Every storage is attributed to a module (parameters: their owner; gradients and optimizer state:
their parameter's owner; activations and temporaries: the module running when they were made),
and a group key is a function of that module path. Rows add up to the totals by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Callable

import torch

from memgraph.analysis.result import ModuleRow, TensorGroup, TensorRow, Totals
from memgraph.model_spec.quantize import parameters_per_element
from memgraph.trace.record.event_log import Category, EventLog


@lru_cache(maxsize=None)
def itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def group_by(log: EventLog, sizes: list[int], key: Callable[[str], str], alive: set[int], trainable: set[int],
             last_iteration: int, quantize: str | None = None) -> dict[str, Totals]:
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
            # the model's parameters, not stored elements (--quantize 4bit packs two per byte: quantize.py)
            numel = s.nbytes // max(itemsize(s.dtype), 1) * parameters_per_element(quantize, s.dtype)
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


# -- repeated layers: identical siblings folded into one row, identical tensors grouped --------------------


@dataclass
class ModuleRun:
    """``count`` consecutive sibling modules with identical figures (``transformer.h.1-11``), or one module.

    ``row`` holds one module's figures, its ``module`` the label (``transformer.h.1-11.mlp``); ``first`` and
    ``last`` are the layer indices of the run (None for a row that is not folded)."""

    row: ModuleRow
    count: int = 1
    first: int | None = None
    last: int | None = None


def fold_repeated(rows: list[ModuleRow]) -> list[ModuleRun]:
    """``rows`` (in :func:`module_order`) with runs of identical layers folded.

    A layer is the subtree under a module path's first numeric part (``transformer.h.3`` and its children);
    consecutive layers of the same parent whose rows have the same paths below the index and equal figures
    (every :class:`Totals` field) fold into one run. A layer that differs (``h.0`` holding the embedding
    output) stays its own, splitting the run: ``h.0``, ``h.1-11``.
    """
    blocks: list[tuple[str | None, int, list[ModuleRow]]] = []  # (parent path, index, rows); parent None: no index
    for r in rows:
        parts = r.module.split(".") if r.module else []
        i = next((k for k, part in enumerate(parts) if part.isdigit()), None)
        if i is None:
            blocks.append((None, 0, [r]))
            continue
        parent, n = ".".join(parts[:i]), int(parts[i])
        if blocks and blocks[-1][0] == parent and blocks[-1][1] == n:
            blocks[-1][2].append(r)
        else:
            blocks.append((parent, n, [r]))
    out: list[ModuleRun] = []
    i = 0
    while i < len(blocks):
        parent, first, layer = blocks[i]
        j = i + 1
        if parent is not None:
            sig = _signature(layer, parent)
            while (j < len(blocks) and blocks[j][0] == parent and blocks[j][1] == first + (j - i)
                   and _signature(blocks[j][2], parent) == sig):
                j += 1
        count = j - i
        if count == 1:
            out += [ModuleRun(r) for r in layer]
        else:
            last = first + count - 1
            for r in layer:
                rest = r.module[len(parent) + 1:].partition(".")[2] if parent else r.module.partition(".")[2]
                label = ".".join(p for p in (parent, f"{first}-{last}", rest) if p)
                out.append(ModuleRun(ModuleRow(module=label, **vars_of(r)), count, first, last))
        i = j
    return out


def _signature(layer: list[ModuleRow], parent: str) -> tuple:
    """A layer's rows as (path below the index, figures): equal for identical layers."""
    cut = len(parent) + 1 if parent else 0
    return tuple((r.module[cut:].partition(".")[2], tuple(vars_of(r).values())) for r in layer)


@lru_cache(maxsize=None)  # a pure function of a few thousand module paths, called for every tensor at every peak
def path_pattern(path: str) -> str:
    """``path`` with every numeric dotted part replaced by ``*`` (``transformer.h.*.mlp.act``)."""
    return ".".join("*" if p.isdigit() else p for p in path.split(".")) if path else path


def tensor_groups(rows: list[TensorRow], top: int) -> list[TensorGroup]:
    """The ``top`` largest groups of identical tensors in ``rows``, largest total first.

    Identical: same category, name and module pattern (:func:`path_pattern`), shape, dtype, size and
    phase/iteration of making; 32 layers' ``aten.mul.Tensor`` outputs in ``model.layers.*.mlp.act_fn`` are one group.
    A name or module every tensor of the group shares is kept as it is (a group of one keeps its own).
    """
    groups: dict[tuple, TensorGroup] = {}
    first: dict[int, TensorRow] = {}  # id(group) -> its first tensor
    same: dict[int, list[bool]] = {}  # id(group) -> [all share the first's name, all share its module]
    for t in rows:
        key = (t.category, path_pattern(t.name), path_pattern(t.module), t.phase, t.iteration, tuple(t.shape),
               t.dtype, t.bytes)
        g = groups.get(key)
        if g is None:
            g = groups[key] = TensorGroup(name=key[1], category=t.category, module=key[2], phase=t.phase,
                                          iteration=t.iteration, shape=list(t.shape), dtype=t.dtype, bytes=t.bytes,
                                          count=0, total_bytes=0, held_past_last_use_bytes=0)
            first[id(g)], same[id(g)] = t, [True, True]
        else:
            flags, f = same[id(g)], first[id(g)]
            flags[0] &= t.name == f.name
            flags[1] &= t.module == f.module
        g.count += 1
        g.total_bytes += t.bytes
        if t.held_past_last_use:
            g.held_past_last_use_bytes += t.bytes
    top_groups = sorted(groups.values(), key=lambda g: (-g.total_bytes, -g.bytes))[:top]
    for g in top_groups:  # a name or module the whole group shares is shown as it is, not as a pattern
        same_name, same_module = same[id(g)]
        if same_name:
            g.name = first[id(g)].name
        if same_module:
            g.module = first[id(g)].module
    return top_groups
