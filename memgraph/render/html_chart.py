"""What the HTML timeline draws, in data units: the steady-state points in columns that keep their maxima.

The timeline points of iterations 2 to N (the whole run if there is only one), downsampled to
:data:`PLOT_POINTS` columns that each keep their bucket's highest point (with its split by category)
and highest reserved bytes, so no peak is lost; the y axis' top at a round value with room for labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from memgraph.analysis.categorize import ORDER
from memgraph.analysis.result import Result, TimelinePoint

PLOT_POINTS = 480  # columns of the plot: about 2 px each at 1400 px
UNATTRIBUTED = "unattributed"  # a point's bytes its by_category does not cover (results without the split)


@dataclass
class Column:
    """One plotted column: the highest timeline point of its bucket, and the bucket's highest reserved."""

    start: int  # the first event of the column (its left edge)
    event: int  # the event of its highest point
    bytes: int
    iteration: int
    phase: str
    by_category: dict[str, int]
    reserved: int | None


@dataclass
class Chart:
    """What the SVG draws, in data units; the tests read it too."""

    columns: list[Column]
    categories: list[str]  # stacked bottom to top
    first_event: int
    end_event: int  # one past the last event shown
    capacity: int | None
    top: float = 0.0  # bytes at the top of the y axis


def steady_points(r: Result) -> list[TimelinePoint]:
    """The timeline points of iterations 2 to N; all of them if the run has one iteration."""
    points = sorted(r.timeline, key=lambda p: p.event)
    starts = r.iteration_starts or []
    if len(starts) >= 2:
        steady = [p for p in points if p.event >= starts[1]]
        if steady:
            return steady
    return points


def _split(p: TimelinePoint) -> dict[str, int]:
    split = dict(p.by_category or {})
    rest = p.bytes - sum(split.values())
    if rest > 0:
        split[UNATTRIBUTED] = rest
    return split


def downsample(points: list[TimelinePoint], n: int = PLOT_POINTS) -> list[Column]:
    """At most ``n`` columns; each keeps its bucket's highest point and highest reserved bytes."""
    out = []
    for k in range(min(n, len(points))):
        bucket = points[k * len(points) // min(n, len(points)):(k + 1) * len(points) // min(n, len(points))]
        best = max(bucket, key=lambda p: p.bytes)
        reserved = [p.reserved for p in bucket if p.reserved is not None]
        out.append(Column(bucket[0].event, best.event, best.bytes, best.iteration, best.phase, _split(best),
                          max(reserved) if reserved else None))
    return out


def chart_of(r: Result) -> Chart:
    points = steady_points(r)
    columns = downsample(points)
    seen = {c for col in columns for c in col.by_category}
    order = [c.value for c in ORDER] + [UNATTRIBUTED]
    categories = [c for c in order if c in seen] + sorted(seen - set(order))
    capacity = r.device.capacity_bytes if r.device else None
    chart = Chart(columns, categories, columns[0].start, max(p.event for p in r.timeline) + 1, capacity)
    highest = max([c.bytes for c in columns] + [c.reserved or 0 for c in columns] + [1])
    shown_capacity = capacity if capacity and capacity <= 2 * highest else 0  # a far-off capacity is named, not drawn
    chart.top = y_ticks(max(highest, shown_capacity) * 1.18)[-1]  # headroom for the labels above the peaks
    return chart


def y_ticks(top: float) -> list[float]:
    """4-6 gridlines at round values in the binary unit human_bytes would pick for ``top``."""
    unit = 1.0
    while top / unit >= 1024 and unit < 1024**4:
        unit *= 1024
    v = max(top / unit, 1e-9)
    decade = 10.0 ** (len(str(int(v))) - 1) / 10 if v >= 1 else 0.1
    while True:
        for m in (1, 2, 2.5, 5):
            step = m * decade
            if -(-v // step) <= 6:
                n = int(-(-v // step))
                return [i * step * unit for i in range(max(n, 1) + 1)]
        decade *= 10


def x_ticks(first: int, last: int) -> list[int]:
    span = max(last - first, 1)
    decade = 10 ** (len(str(span)) - 1)
    for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 5):
        step = max(1, int(m * decade))
        if span // step <= 8:
            return [t for t in range(-(-first // step) * step, last + 1, step)]
    return [first, last]
