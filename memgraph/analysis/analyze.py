"""From a trace to a :class:`Result`: sizes, timeline, peaks, breakdowns, per-module table."""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import Counter, defaultdict
from functools import lru_cache

import torch

from ..allocator.rounding import ALLOCATED_SIZE
from ..annotate.categories import ORDER, Category, categorize
from ..ops.registry import unknown_ops
from ..trace.recorder import StorageRecord
from ..trace.run import Trace
from .liveness import alive_after, argmax_in, live_bytes
from .modality import SHARED
from .modality_table import modality_rows
from .result import SCHEMA_VERSION, ModuleRow, Peak, Result, TensorRow, TimelinePoint

METRIC = {"cuda": "torch.cuda.max_memory_allocated", "cpu": "peak of CPU allocator bytes (torch.profiler)"}
TOP_TENSORS = 12
TIMELINE_POINTS = 1500


def analyze_trace(trace: Trace, model_name: str, options: dict, target: str, depth: int = 3) -> Result:
    start = time.perf_counter()
    rec = trace.recorder
    sizes = [ALLOCATED_SIZE[target](s.nbytes) for s in rec.storages]
    cats = [categorize(s) for s in rec.storages]
    live = live_bytes(rec.events, sizes)
    (lo1, hi1), lo_steady, hi_last = trace.iteration_bounds[0], trace.iteration_bounds[1][0], trace.iteration_bounds[-1][1]
    where = _Locator(rec)
    first = _peak(rec, live, sizes, cats, where, argmax_in(live, lo1, hi1))
    steady_index = argmax_in(live, lo_steady, hi_last)
    alive_at_steady = alive_after(rec.events, steady_index)
    steady = _peak(rec, live, sizes, cats, where, steady_index, alive_at_steady)
    return Result(
        schema_version=SCHEMA_VERSION, model=model_name, target=target, metric=METRIC[target],
        options=options, batch=trace.batch, optimizer_impl=trace.optimizer_impl,
        parameters=trace.parameter_count, trainable_parameters=trace.trainable_parameter_count,
        static=_static(rec.storages, sizes, cats, len(trace.iteration_bounds)),
        first_iteration_peak=first, steady_state_peak=steady,
        modules=_modules(rec.storages, sizes, cats, alive_at_steady, trace, depth),
        timeline=_timeline(where, live),
        iteration_starts=[lo for lo, _ in trace.iteration_bounds],
        ops={"count": len(rec.ops), "graph_nodes": len(rec.graph.nodes),
             "unknown": dict(unknown_ops(o.op for o in rec.ops))},
        trace_seconds=round(trace.seconds, 3), analysis_seconds=round(time.perf_counter() - start, 3),
        versions=_versions(), notes=list(trace.notes),
        device=_device(trace, options) if target == "cuda" else None,
        modalities=modality_rows(rec.storages, sizes, cats, alive_at_steady, trace.modalities, trace.trainable_sids,
                                 len(trace.iteration_bounds), _itemsize),
        peak_modality=trace.modalities.get(steady.module, SHARED),
        phase_peaks=_phase_peaks(rec, live, sizes, cats, where, trace.iteration_bounds[-1]),
    )


PHASE_TOP_TENSORS = 3


def _phase_peaks(rec, live, sizes, cats, where: _Locator, bounds: tuple[int, int]) -> list[Peak]:
    """The highest point of each phase (forward, backward, optimizer, ...) of the last iteration.

    What is alive when a phase begins counts as the phase's own (a phase that allocates nothing, such
    as plain SGD's in-place step, peaks at its start); such a peak names no module or op.
    """
    lo, hi = bounds
    starts = [m[0] for m in rec.phase_marks] + [hi]
    best: dict[str, tuple[int, bool]] = {}  # phase -> (event index, is the phase's start)
    for (start, iteration, phase), end in zip(rec.phase_marks, starts[1:]):
        if iteration == 0 or start < lo or start >= hi:
            continue
        candidates = [(start - 1, True)] if start > 0 else []
        if start < end:
            candidates.append((argmax_in(live, start, end), False))
        i, at_start = max(candidates, key=lambda c: (live[c[0]], not c[1]))
        if phase not in best or live[i] > live[best[phase][0]]:
            best[phase] = (i, at_start)
    peaks = []
    for phase, (i, at_start) in best.items():
        p = _peak(rec, live, sizes, cats, where, i)
        p.top_tensors = p.top_tensors[:PHASE_TOP_TENSORS]
        if at_start:
            p.phase, p.module, p.op = phase, "", ""
        peaks.append(p)
    return peaks


def _device(trace: Trace, options: dict) -> dict:
    from dataclasses import asdict

    from .device import device_peaks

    return asdict(device_peaks(trace.recorder, trace.iteration_bounds, options["gpu"], options.get("allocator_conf", "")))


class _Locator:
    """Where each event happened: iteration and phase (from phase marks), module and op."""

    def __init__(self, rec):
        self.rec = rec
        self.op_at: list[int] = []  # index of the last op that ran at or before each event
        op = -1
        for i in range(len(rec.events)):
            while op + 1 < len(rec.ops) and rec.ops[op + 1].event <= i:
                op += 1
            self.op_at.append(op)
        self.mark_events = [m[0] for m in rec.phase_marks]

    def __call__(self, index: int) -> tuple[int, str, str, str]:
        """(iteration, phase, module, op) at event ``index``."""
        m = self.rec.phase_marks[max(0, bisect_right(self.mark_events, index) - 1)]
        iteration, phase = m[1], m[2]
        op = self.op_at[index]
        if op >= 0 and self.rec.ops[op].event >= m[0]:  # an op of this phase is running
            o = self.rec.ops[op]
            return iteration, phase, o.module, o.op
        return iteration, phase, "", ""


def _peak(rec, live, sizes, cats, where: _Locator, index: int, alive: set[int] | None = None) -> Peak:
    alive = alive_after(rec.events, index) if alive is None else alive
    iteration, phase, module, op = where(index)
    by_cat = Counter()
    for sid in alive:
        by_cat[cats[sid].value] += sizes[sid]
    peak_node = where.op_at[index]
    rows = [_tensor_row(rec.storages[sid], sizes[sid], cats[sid], peak_node) for sid in alive]
    held = sum(r.bytes for r in rows if r.held_past_last_use)
    rows.sort(key=lambda r: -r.bytes)
    return Peak(
        bytes=live[index], iteration=iteration, phase=phase, module=module, op=op, event=index,
        by_category={c.value: by_cat.get(c.value, 0) for c in ORDER}, held_past_last_use_bytes=held,
        top_tensors=rows[:TOP_TENSORS],
    )


def _tensor_row(s: StorageRecord, size: int, cat: Category, peak_node: int) -> TensorRow:
    transient = cat in (Category.ACTIVATION, Category.TEMPORARY)
    return TensorRow(
        name=s.name, category=cat.value, module=s.module, phase=s.phase, iteration=s.iteration,
        shape=list(s.shape), dtype=s.dtype, bytes=size,
        held_past_last_use=transient and s.last_use_node < peak_node,
    )


def _static(storages, sizes, cats, last_iteration: int) -> dict[str, int]:
    """Bytes of the long-lived categories in the steady state (gradients: one iteration's)."""
    out = {c.value: 0 for c in (Category.PARAMETER, Category.BUFFER, Category.GRADIENT, Category.OPTIMIZER_STATE)}
    for sid, s in enumerate(storages):
        c = cats[sid]
        if (c in (Category.PARAMETER, Category.BUFFER)
                or (c == Category.OPTIMIZER_STATE and s.free_event is None)
                or (c == Category.GRADIENT and s.iteration == last_iteration)):
            out[c.value] += sizes[sid]
    return out


def _prefix(path: str, depth: int) -> str:
    return ".".join(path.split(".")[:depth]) if path else ""


def _modules(storages, sizes, cats, alive, trace: Trace, depth: int) -> list[ModuleRow]:
    rows: dict[str, dict] = defaultdict(lambda: dict(parameters=0, trainable_parameters=0, parameter_bytes=0,
                                                     saved_activation_bytes=0, peak_bytes=0))
    trainable = trace.trainable_sids
    last_iter = len(trace.iteration_bounds)
    for sid, s in enumerate(storages):
        row = rows[_prefix(s.module, depth)]
        if cats[sid] == Category.PARAMETER:
            numel = s.nbytes // max(_itemsize(s.dtype), 1)
            row["parameters"] += numel
            row["parameter_bytes"] += sizes[sid]
            if sid in trainable:
                row["trainable_parameters"] += numel
        if s.saved_for_backward and s.iteration == last_iter and s.phase == "forward":
            row["saved_activation_bytes"] += sizes[sid]
        if sid in alive:
            row["peak_bytes"] += sizes[sid]
    return [ModuleRow(module=k, **v) for k, v in sorted(rows.items(), key=lambda kv: _module_order(kv[0]))]


def _module_order(path: str) -> tuple:
    """Sort module paths with numeric parts as numbers (layers.2 before layers.10)."""
    parts = path.split(".") if path else []
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


@lru_cache(maxsize=None)
def _itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def _timeline(where: _Locator, live: list[int]) -> list[TimelinePoint]:
    """At most TIMELINE_POINTS points: each bucket keeps its highest point, so peaks survive."""
    n = len(live)
    if n == 0:
        return []
    step = max(1, -(-n // TIMELINE_POINTS))
    points = []
    for lo in range(0, n, step):
        i = argmax_in(live, lo, min(n, lo + step))
        iteration, phase, _, _ = where(i)
        points.append(TimelinePoint(event=i, bytes=live[i], iteration=iteration, phase=phase))
    return points


def _versions() -> dict[str, str]:
    from .. import __version__

    out = {"memgraph": __version__, "torch": torch.__version__}
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:
        pass
    return out
