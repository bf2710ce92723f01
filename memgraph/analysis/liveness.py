"""Liveness over the alloc/free stream: bytes alive after every event, and who is alive when."""

from __future__ import annotations

from memgraph.trace.record.event_log import ALLOC


def live_bytes(events: list[tuple[int, int]], sizes: list[int]) -> list[int]:
    """Bytes alive after each event, given each storage's (rounded) size."""
    out = [0] * len(events)
    cur = 0
    for i, (kind, sid) in enumerate(events):
        cur += sizes[sid] if kind == ALLOC else -sizes[sid]
        out[i] = cur
    return out


def alive_after(events: list[tuple[int, int]], index: int) -> set[int]:
    """Storage ids alive right after event ``index``."""
    alive: set[int] = set()
    for kind, sid in events[: index + 1]:
        if kind == ALLOC:
            alive.add(sid)
        else:
            alive.discard(sid)
    return alive


def argmax_in(values: list[int], lo: int, hi: int) -> int:
    """Index of the first maximum of ``values[lo:hi]``."""
    best = lo
    for i in range(lo, hi):
        if values[i] > values[best]:
            best = i
    return best
