"""Batch interpolation: a trace at one batch size made from real traces at two others.

The recorded event stream of a training step does not depend on the batch size (the same ops run in the same
order; only each storage's size changes, as an exact affine function of the batch:
``nbytes(b) = nbytes(lo) + (b - lo) * slope``). :class:`AffineFit` holds those functions, from two traces
that record the same stream (trace/shortcuts/checks.py ``same_stream``), where every storage's bytes and
shape land on integers at each size asked for and at most one dim of a shape changes with the batch (two would
make its bytes quadratic, e.g. CLIP's ``[b, b]`` logits). :func:`checked` also compares a middle size's real
trace with its interpolation. memgraph/sweep.py (a batch sweep) and memgraph/fit/ (``memgraph fit``) use it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.trace.record.event_log import EventLog, StorageRecord
from memgraph.trace.shortcuts.checks import same_stream, storage_sizes
from memgraph.trace.tracer import Trace


@dataclass
class AffineFit:
    """Each storage's bytes and shape as exact affine functions of the batch size, from two traces."""

    lo: int
    hi: int
    lo_trace: Trace
    hi_trace: Trace
    # per storage: (bytes at lo, bytes slope numerator, shape at lo, shape slope numerators); slope = num / (hi - lo)
    terms: list[tuple[int, int, tuple[int, ...], tuple[int, ...]]]
    # per bounded unknown of the trace: (expected at lo, its slope numerator, upper at lo, its slope numerator)
    unknown_terms: list[tuple[int, int, int, int]] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"interpolated from batch {self.lo} and {self.hi}"

    @classmethod
    def of(cls, a: Trace, lo: int, b: Trace, hi: int, sizes: list[int]) -> "AffineFit | None":
        """The fit through traces ``a`` (batch ``lo``) and ``b`` (``hi``), if it is exact at every size in ``sizes``."""
        if not same_stream(a, b):
            return None
        terms = []
        for x, y in zip(a.log.storages, b.log.storages):
            dims = tuple(q - p for p, q in zip(x.shape, y.shape))
            if sum(d != 0 for d in dims) > 1:  # two dims grow: the bytes are not affine in the batch
                return None
            terms.append((x.nbytes, y.nbytes - x.nbytes, x.shape, dims))
        unknowns = [(x.expected_bytes, y.expected_bytes - x.expected_bytes, x.upper_bytes, y.upper_bytes - x.upper_bytes)
                    for x, y in zip(a.unknowns, b.unknowns)]
        fit = cls(lo, hi, a, b, terms, unknowns)
        return fit if all(fit.exact_at(size) for size in sizes) else None

    def exact_at(self, batch: int) -> bool:
        """Whether every storage's bytes and shape land on integers at ``batch`` (the fit is exact there)."""
        step, span = batch - self.lo, self.hi - self.lo
        return (all(_integral(t, step, span) for t in self.terms)
                and all((e * step) % span == 0 and (u * step) % span == 0 for _, e, _, u in self.unknown_terms))

    def sizes_at(self, batch: int) -> list[tuple[int, tuple[int, ...]]]:
        """(bytes, shape) of every storage at ``batch``."""
        step, span = batch - self.lo, self.hi - self.lo
        return [(n + slope * step // span, shape if not any(dims) else
                 tuple(d + s * step // span for d, s in zip(shape, dims)))
                for n, slope, shape, dims in self.terms]

    def trace_at(self, batch: int, spec: ModelSpec, opts: TrainingOptions) -> Trace:
        """A :class:`Trace` as if the step had been traced at ``batch``: the same stream, interpolated sizes."""
        start = time.perf_counter()
        base = self.hi_trace if batch - self.lo > self.hi - batch else self.lo_trace
        storages = [_resized(s, n, shape) for s, (n, shape) in zip(base.log.storages, self.sizes_at(batch))]
        log = EventLog(storages=storages, events=base.log.events, ops=base.log.ops, phase_marks=base.log.phase_marks)
        batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
        nearer = self.hi if base is self.hi_trace else self.lo
        other = self.lo_trace if base is self.hi_trace else self.hi_trace
        notes = [n if n in other.notes else f"(at batch {nearer}) {n}" for n in base.notes]
        notes.append(f"sweep: batch {batch} {self.source} (memgraph/trace/shortcuts/batch.py): every storage's size is affine in "
                     "the batch size and the two traces record the same stream")
        step, span = batch - self.lo, self.hi - self.lo
        unknowns = [replace(u, expected_bytes=e0 + e * step // span, upper_bytes=u0 + du * step // span)
                    for u, (e0, e, u0, du) in zip(self.lo_trace.unknowns, self.unknown_terms)]
        return replace(base, log=log, batch=[s.describe() for s in batch_spec.inputs], notes=notes, unknowns=unknowns,
                       seconds=time.perf_counter() - start)


def _integral(term, step: int, span: int) -> bool:
    _, slope, _, dims = term
    return (slope * step) % span == 0 and all((d * step) % span == 0 for d in dims)


def _resized(s: StorageRecord, nbytes: int, shape: tuple[int, ...]) -> StorageRecord:
    return StorageRecord(s.sid, nbytes, s.dtype, shape, s.origin, s.name, s.module, s.phase, s.iteration,
                         s.op_index, s.alloc_event, s.free_event, s.last_use_op, s.saved_for_backward, s.role)


def checked(fit: "AffineFit", sizes: list[int], traced) -> "AffineFit | None":
    """``fit`` if a real trace at a middle size equals its interpolation, else None."""
    middle = [b for b in sizes if b not in (fit.lo, fit.hi)]
    if not middle:
        return fit
    b = middle[len(middle) // 2]
    real = traced(b)
    return fit if same_stream(real, fit.lo_trace) and storage_sizes(real.log) == fit.sizes_at(b) else None


__all__ = ["AffineFit", "checked"]
