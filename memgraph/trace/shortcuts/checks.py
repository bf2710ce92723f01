"""The checks of the shortcuts (trace/shortcuts/): a trace made from other traces against a real trace.

Depth synthesis is trusted only where its synthesis of ``BASE_DEPTH + 1`` layers equals the real trace at that
depth (:func:`first_difference`: every field, storage, event, op and phase mark); batch interpolation only
where the two traces it interpolates record the same stream (:func:`same_stream`: everything but the sizes)
and, with ``--sweep-check``, where a middle size's real trace has the interpolated sizes (:func:`storage_sizes`).
"""

from __future__ import annotations

from dataclasses import fields

from memgraph.facts.unknowns import BoundedUnknown
from memgraph.trace.record.event_log import EventLog, StorageRecord


def first_difference(a, b) -> str | None:
    """The first field in which traces ``a`` and ``b`` differ, in words; None when they are equal (the
    ``seconds`` they took aside)."""
    for f in fields(a):
        if f.name in ("seconds", "log"):
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "modalities":
            x, y = list(x.items()), list(y.items())
        if x != y:
            return f"{f.name} differs"
    la, lb = a.log, b.log
    for name in ("storages", "events", "ops", "phase_marks"):
        xs, ys = getattr(la, name), getattr(lb, name)
        if len(xs) != len(ys):
            return f"{len(xs)} {name} instead of {len(ys)}"
        for i, (x, y) in enumerate(zip(xs, ys)):
            if x != y:
                return f"{name}[{i}]: {_fields_differing(x, y)}"
    return None


def _fields_differing(x, y) -> str:
    if not hasattr(x, "__slots__"):
        return f"{x} instead of {y}"
    return ", ".join(f"{f.name} {getattr(x, f.name)!r} instead of {getattr(y, f.name)!r}"
                     for f in fields(x) if getattr(x, f.name) != getattr(y, f.name))


def storage_sizes(log: EventLog) -> list[tuple[int, tuple[int, ...]]]:
    return [(s.nbytes, s.shape) for s in log.storages]


def _stream_key(s: StorageRecord) -> tuple:
    """Everything about a storage except its size and shape (and the analysis' category)."""
    return (s.sid, s.dtype, len(s.shape), s.origin, s.name, s.module, s.phase, s.iteration, s.op_index,
            s.alloc_event, s.free_event, s.last_use_op, s.saved_for_backward, s.role)


def same_stream(a, b) -> bool:
    """The two traces (trace/tracer.py ``Trace``) record the same step: same events, ops, phases and storages (sizes aside)."""
    la, lb = a.log, b.log
    return (la.events == lb.events and la.phase_marks == lb.phase_marks and la.ops == lb.ops
            and a.iteration_bounds == b.iteration_bounds and a.trainable_sids == b.trainable_sids
            and a.parameter_count == b.parameter_count and a.optimizer_impl == b.optimizer_impl
            and a.modalities == b.modalities and len(la.storages) == len(lb.storages)
            and [_unknown_key(u) for u in a.unknowns] == [_unknown_key(u) for u in b.unknowns]
            and all(_stream_key(x) == _stream_key(y) for x, y in zip(la.storages, lb.storages)))


def _unknown_key(u: BoundedUnknown) -> tuple:
    """A bounded unknown without its bytes (which grow with the batch, e.g. the efficient-attention workspace)."""
    return (u.name, u.source, u.counter)


__all__ = ["first_difference", "same_stream", "storage_sizes"]
