"""The memory timeline: live bytes over events, downsampled so that every peak survives."""

from __future__ import annotations

from memgraph.analysis.liveness import argmax_in
from memgraph.analysis.peaks import Locator
from memgraph.analysis.result import TimelinePoint

TIMELINE_POINTS = 1500


def timeline(where: Locator, live: list[int], points: int = TIMELINE_POINTS) -> list[TimelinePoint]:
    """At most ``points`` points: each bucket keeps its highest point."""
    n = len(live)
    if n == 0:
        return []
    step = max(1, -(-n // points))
    out = []
    for lo in range(0, n, step):
        i = argmax_in(live, lo, min(n, lo + step))
        iteration, phase, _, _ = where(i)
        out.append(TimelinePoint(event=i, bytes=live[i], iteration=iteration, phase=phase))
    return out
