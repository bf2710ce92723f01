"""Peaks over the live-bytes curve: where they are, and what is alive at them."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter

from memgraph.analysis.categorize import ORDER
from memgraph.analysis.group_by import tensor_groups
from memgraph.analysis.liveness import alive_after, argmax_in
from memgraph.analysis.result import Peak, TensorRow
from memgraph.trace.record.event_log import Category, EventLog, StorageRecord

TOP_TENSORS = 12
PHASE_TOP_TENSORS = 3


class Locator:
    """Where each event happened: iteration and phase (from phase marks), module and op."""

    def __init__(self, log: EventLog):
        self.log = log
        self.op_at: list[int] = []  # index of the last op that ran at or before each event
        op, ops = -1, log.ops
        for i in range(len(log.events)):
            while op + 1 < len(ops) and ops[op + 1].event <= i:
                op += 1
            self.op_at.append(op)
        self.mark_events = [m[0] for m in log.phase_marks]

    def __call__(self, index: int) -> tuple[int, str, str, str]:
        """(iteration, phase, module, op) at event ``index``."""
        m = self.log.phase_marks[max(0, bisect_right(self.mark_events, index) - 1)]
        iteration, phase = m[1], m[2]
        op = self.op_at[index]
        if op >= 0 and self.log.ops[op].event >= m[0]:  # an op of this phase is running
            o = self.log.ops[op]
            return iteration, phase, o.module, o.op
        return iteration, phase, "", ""


def peak_at(log: EventLog, live: list[int], sizes: list[int], where: Locator, index: int,
            alive: set[int] | None = None, top: int = TOP_TENSORS) -> Peak:
    """The peak at event ``index``: its place, bytes by category, and its ``top`` largest storages."""
    alive = alive_after(log.events, index) if alive is None else alive
    iteration, phase, module, op = where(index)
    by_cat = Counter()
    for sid in alive:
        by_cat[log.storages[sid].category] += sizes[sid]
    peak_op = where.op_at[index]
    rows = [_tensor_row(log.storages[sid], sizes[sid], peak_op) for sid in alive]
    held = sum(r.bytes for r in rows if r.held_past_last_use)
    rows.sort(key=lambda r: -r.bytes)
    return Peak(
        bytes=live[index], iteration=iteration, phase=phase, module=module, op=op, event=index,
        by_category={c.value: by_cat.get(c, 0) for c in ORDER}, held_past_last_use_bytes=held,
        top_tensors=rows[:top], top_tensor_groups=tensor_groups(rows, top),
    )


def _tensor_row(s: StorageRecord, size: int, peak_op: int) -> TensorRow:
    transient = s.category in (Category.ACTIVATION, Category.TEMPORARY)
    return TensorRow(
        name=s.name, category=s.category.value, module=s.module, phase=s.phase, iteration=s.iteration,
        shape=list(s.shape), dtype=s.dtype, bytes=size,
        held_past_last_use=transient and s.last_use_op < peak_op,
    )


def phase_peaks(log: EventLog, live: list[int], sizes: list[int], where: Locator, bounds: tuple[int, int]) -> list[Peak]:
    """The highest point of each phase (forward, backward, optimizer, ...) of the iteration in ``bounds``.

    What is alive when a phase begins counts as the phase's own (a phase that allocates nothing, such
    as plain SGD's in-place step, peaks at its start); such a peak names no module or op.
    """
    lo, hi = bounds
    starts = [m[0] for m in log.phase_marks] + [hi]
    best: dict[str, tuple[int, bool]] = {}  # phase -> (event index, is the phase's start)
    for (start, iteration, phase), end in zip(log.phase_marks, starts[1:]):
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
        p = peak_at(log, live, sizes, where, i, top=PHASE_TOP_TENSORS)
        if at_start:
            p.phase, p.module, p.op = phase, "", ""
        peaks.append(p)
    return peaks
