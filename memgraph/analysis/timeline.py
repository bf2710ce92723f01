"""The memory timeline: live bytes over events, downsampled so that every peak survives.

Each point is the highest point of its bucket of events, with what is alive there by category (the
HTML report stacks them); the cuda target adds the allocator replay's reserved bytes per bucket
(:func:`add_reserved`).
"""

from __future__ import annotations

from memgraph.analysis.categorize import ORDER
from memgraph.analysis.liveness import argmax_in
from memgraph.analysis.peaks import Locator
from memgraph.analysis.result import TimelinePoint
from memgraph.trace.record.event_log import ALLOC, EventLog

TIMELINE_POINTS = 1500


def bucket_step(n: int, points: int = TIMELINE_POINTS) -> int:
    """Events per bucket: buckets are ``[k * step, (k + 1) * step)``, at most ``points`` of them."""
    return max(1, -(-n // points))


def timeline(where: Locator, live: list[int], log: EventLog, sizes: list[int],
             points: int = TIMELINE_POINTS) -> list[TimelinePoint]:
    """At most ``points`` points: each bucket keeps its highest point, split by category."""
    n = len(live)
    if n == 0:
        return []
    step = bucket_step(n, points)
    picked = [argmax_in(live, lo, min(n, lo + step)) for lo in range(0, n, step)]
    split = _by_category(log, sizes, picked)
    out = []
    for i, by_category in zip(picked, split):
        iteration, phase, _, _ = where(i)
        out.append(TimelinePoint(event=i, bytes=live[i], iteration=iteration, phase=phase, by_category=by_category))
    return out


def _by_category(log: EventLog, sizes: list[int], picked: list[int]) -> list[dict[str, int]]:
    """Bytes alive by category right after each event in ``picked`` (ascending): one pass over the events."""
    current = {c: 0 for c in ORDER}
    storages, events = log.storages, log.events
    out, start = [], 0
    for index in picked:
        for kind, sid in events[start:index + 1]:
            current[storages[sid].category] += sizes[sid] if kind == ALLOC else -sizes[sid]
        start = index + 1
        out.append({c.value: b for c, b in current.items() if b})
    return out


def add_reserved(points: list[TimelinePoint], reserved_after: list[int], n_events: int) -> None:
    """Set each point's ``reserved``: the highest of ``reserved_after`` (one value per event) over its bucket.

    The buckets are the ones :func:`timeline` cut the ``n_events`` events into; a replay that stopped
    early (out of memory) leaves the points past its end at None.
    """
    step = bucket_step(n_events)
    for p in points:
        lo = p.event - p.event % step
        window = reserved_after[lo:lo + step]
        p.reserved = max(window) if window else None
