"""The HTML report's timeline: its data (each point split by category, the replay's reserved bytes per
bucket), its downsampling (maxima kept), its labels (never overlapping) and, on a real analysis, a page
that is one self-contained file whose stacked series, capacity line and labelled peak match the report."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import pytest

from memgraph.allocator.replay import log_stream, replay
from memgraph.analysis.result import TimelinePoint
from memgraph.analysis.timeline import add_reserved, bucket_step
from memgraph.api import analyze_traced
from memgraph.model_spec.options import TrainingOptions
from memgraph.render.html import render_html
from memgraph.render.html_chart import chart_of, downsample
from memgraph.render.html_labels import Label, overlaps, place
from memgraph.render.html_timeline import BOTTOM, TOP, H, Scale, W
from memgraph.units import GiB, MiB, human_bytes

TINY_LLAMA = "tests/configs/tiny-llama.json"
# 96 MiB: above the tiny step's 69 MiB peak and within twice it, so the capacity line is on the chart
CAPACITY = 96 * MiB


@pytest.fixture(scope="module")
def traced():
    opts = TrainingOptions(seq_len=16, precision="bf16-mixed", attn_implementation="sdpa", target="cuda",
                           gpu_memory=CAPACITY)
    return analyze_traced(TINY_LLAMA, opts)


@pytest.fixture(scope="module")
def page(traced) -> str:
    return render_html(traced[0])


# ---------------------------------------------------------------- the data


def test_points_split_by_category(traced):
    """Each point's categories add up to its bytes; at the steady-state peak they equal the peak's own
    breakdown, which analysis/peaks.py computes another way (the set of storages alive there)."""
    r, trace = traced
    assert len(trace.log.events) <= 1500  # one point per event: every event is a point
    assert [p.event for p in r.timeline] == list(range(len(trace.log.events)))
    for p in r.timeline:
        assert sum(p.by_category.values()) == p.bytes and all(b > 0 for b in p.by_category.values())
    (at_peak,) = [p for p in r.timeline if p.event == r.steady_state_peak.event]
    assert at_peak.by_category == {c: b for c, b in r.steady_state_peak.by_category.items() if b}


def test_reserved_is_the_replays(traced):
    """With one event per bucket, each point's reserved is the replay's reserved after that event; the
    highest is the device record's reserved peak (the uncapped replay: this capacity runs out)."""
    r, trace = traced
    run = replay(log_stream(trace.log), keep_reserved=True)
    assert [p.reserved for p in r.timeline] == run.reserved_after
    assert max(p.reserved for p in r.timeline) == max(r.device["first_iteration_reserved"],
                                                      r.device["steady_state_reserved"])
    assert "reserved_after" not in r.device  # per event: in the timeline, not in the JSON device record


def test_reserved_takes_the_bucket_maximum():
    """3,001 events in at most 1,500 buckets: step ceil(3001 / 1500) = 3; the point at event 4 stands for
    bucket [3, 6), whose highest reserved is event 5's."""
    assert bucket_step(3001) == 3
    reserved = [10 * i for i in range(3001)]
    reserved[5] = 999
    points = [TimelinePoint(event=4, bytes=1, iteration=1, phase="forward"),
              TimelinePoint(event=3000, bytes=1, iteration=1, phase="forward")]
    add_reserved(points, reserved, 3001)
    assert [p.reserved for p in points] == [999, 30000]  # max(30, 40, 999); bucket [3000, 3001)
    add_reserved(points, reserved[:100], 3001)  # a replay that stopped at event 99 (out of memory)
    assert [p.reserved for p in points] == [999, None]


def test_downsample_keeps_each_columns_maximum():
    """10 points in 4 columns: buckets [0,2), [2,5), [5,7), [7,10) (k * 10 // 4); each keeps its highest."""
    values = [5, 9, 1, 7, 3, 2, 8, 4, 6, 0]
    points = [TimelinePoint(event=100 + i, bytes=v, iteration=2, phase="forward", by_category={"activations": v},
                            reserved=20 - i) for i, v in enumerate(values)]
    cols = downsample(points, 4)
    assert [(c.start, c.event, c.bytes, c.reserved) for c in cols] == [
        (100, 101, 9, 20), (102, 103, 7, 18), (105, 106, 8, 15), (107, 108, 6, 13)]
    assert max(c.bytes for c in cols) == max(values)


# ---------------------------------------------------------------- the labels


def test_labels_never_overlap():
    """Twelve labels at nearly the same point, as on a chart whose phase peaks crowd together: every one
    placed lies inside the bounds and meets no other (nor the marker taken beforehand)."""
    bounds = (0.0, 0.0, 600.0, 300.0)
    labels = [Label(300 + i, 150 - i, f"phase {i} peak 101.88 GiB", "#000", "backward, (top level), op")
              for i in range(12)]
    marker = (295.0, 140.0, 305.0, 160.0)
    placed = place(labels, bounds, taken=[marker])
    assert len(placed) == 12
    for a, b in itertools.combinations([lb.box for lb in placed] + [marker], 2):
        assert not overlaps(a, b, pad=0)
    for lb in placed:
        x0, y0, x1, y1 = lb.box
        assert bounds[0] <= x0 < x1 <= bounds[2] and bounds[1] <= y0 < y1 <= bounds[3]
        assert x1 - x0 == pytest.approx(lb.width) and y1 - y0 == pytest.approx(lb.height)


def test_a_label_with_no_room_is_left_out():
    labels = [Label(50, 50, "x" * 10, "#000", size=10) for _ in range(3)]
    placed = place(labels, (0, 0, 100, 40))  # room for two 62 x 10 boxes, one above the other, 3 px apart
    assert 1 <= len(placed) < 3
    assert all(not overlaps(a.box, b.box, pad=0) for a, b in itertools.combinations(placed, 2))


# ---------------------------------------------------------------- the page of a real analysis


def test_page_is_self_contained(page):
    """Nothing to fetch: no src or href at all, no stylesheet link, no CSS import or url()."""
    assert re.findall(r"\b(?:src|href)\s*=", page, re.IGNORECASE) == []
    assert re.findall(r"https?://", page.replace('xmlns="http://www.w3.org/2000/svg"', "")) == []
    assert "<link" not in page.lower() and "@import" not in page and "url(" not in page


def _svg(page: str) -> str:
    return page[page.index('<svg class="timeline"'): page.index("</svg>", page.index('<svg class="timeline"'))]


def test_stacked_series_and_capacity_line(traced, page):
    """One area per category alive in the steady state, the capacity line at the capacity's height, and the
    reserved line: the stack's highest column is the steady-state peak."""
    r, _ = traced
    svg = _svg(page)
    chart = chart_of(r)
    steady = [p for p in r.timeline if p.event >= r.iteration_starts[1]]
    alive = {c for p in steady for c in p.by_category}
    assert set(re.findall(r'<path class="area" data-category="(\w+)"', svg)) == alive == set(chart.categories)
    assert max(sum(c.by_category.values()) for c in chart.columns) == r.steady_state_peak.bytes
    (y,) = re.findall(r'<line class="capacity" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg)
    assert r.device["capacity_bytes"] == CAPACITY
    assert float(y) == pytest.approx(BOTTOM - (BOTTOM - TOP) * CAPACITY / chart.top, abs=0.06)
    assert '<path class="reserved"' in svg
    assert f"capacity {human_bytes(CAPACITY)}" in svg


def test_labelled_peak_is_the_reports(traced, page):
    r, _ = traced
    svg = _svg(page)
    peak = r.steady_state_peak
    marks = re.findall(r'<circle class="peak" cx="([\d.]+)" cy="([\d.]+)" r="5"[^>]*data-bytes="(\d+)"', svg)
    assert len(marks) == 1 and int(marks[0][2]) == peak.bytes
    sc = Scale(chart_of(r))
    assert (float(marks[0][0]), float(marks[0][1])) == (sc.x(peak.event), sc.y(peak.bytes))
    assert f">peak {human_bytes(peak.bytes)}</text>" in svg


def test_page_labels_do_not_overlap(page):
    """Every label the page draws (peaks in the plot, lines in the right margin) inside the picture, apart."""
    boxes = [tuple(map(float, b.split())) for b in re.findall(r'<g class="label" data-box="([^"]+)"', _svg(page))]
    assert len(boxes) >= 3  # the peak, another phase's peak, the capacity
    for a, b in itertools.combinations(boxes, 2):
        assert not overlaps(a, b, pad=0)
    assert all(0 <= x0 < x1 <= W and 0 <= y0 < y1 <= H for x0, y0, x1, y1 in boxes)


def test_far_capacity_is_named_not_drawn(traced):
    """An 80 GiB card under a 69 MiB step: drawing the capacity would flatten the chart, so the margin names
    it (above the scale) and no capacity line is drawn."""
    r, _ = traced
    far = replace(r, device=replace(r.device, capacity_bytes=80 * GiB))
    svg = _svg(render_html(far))
    assert '<line class="capacity"' not in svg
    assert "capacity 80.00 GiB \u2191</text>" in svg and ">above the scale</text>" in svg
