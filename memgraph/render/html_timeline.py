"""The HTML report's memory timeline: one inline SVG of the steady-state iterations.

Allocated bytes stacked by category over the op events of iterations 2 to N, in the columns of
:mod:`memgraph.render.html_chart`. On it: the GPU's capacity, the reserved bytes of the
caching-allocator replay, the phases and iteration starts, where the replay runs out of memory, and
the steady-state peak and each other phase's peak, labelled without overlaps
(:mod:`memgraph.render.html_labels`). The hover (:mod:`memgraph.render.html_hover`) shows the split
under the pointer; the page needs nothing from outside.
"""

from __future__ import annotations

from html import escape

from memgraph.analysis.result import Result
from memgraph.render.html_chart import UNATTRIBUTED, Chart, chart_of, x_ticks, y_ticks
from memgraph.render.html_hover import HOVER_JS, hover_data
from memgraph.render.html_labels import Label, place, text_width
from memgraph.units import human_bytes

PHASE_COLORS = {
    "setup": "#9aa5b1",
    "forward": "#3b82c4",
    "backward": "#8e5cc2",
    "optimizer": "#d9822b",
    "zero_grad": "#2f9e6e",
}
OTHER_COLOR = "#b0b0b0"
CATEGORY_COLORS = {
    "parameters": "#4e79a7",
    "buffers": "#a0cbe8",
    "inputs": "#bab0ac",
    "gradients": "#b07aa1",
    "optimizer_state": "#f28e2b",
    "autocast_cache": "#edc948",
    "activations": "#59a14f",
    "temporaries": "#e15759",
    "workspaces": "#76b7b2",
    UNATTRIBUTED: "#d0d0d0",
}
STEADY_COLOR = "#b71c1c"
CAPACITY_COLOR = "#c62828"
RESERVED_COLOR = "#1f2933"

W, H = 1180, 458
LEFT, RIGHT, TOP, BOTTOM = 76, 180, 66, 392  # plot area: x in [LEFT, W - RIGHT], y in [TOP, BOTTOM]
STRIP = (TOP - 30, TOP - 12)  # the phase strip above the plot (y0, y1)


def _e(value) -> str:
    return escape(str(value), quote=True)


def _axis_label(n: float) -> str:
    return human_bytes(n).replace(".00 ", " ")


class Scale:
    def __init__(self, chart: Chart):
        self.first, self.end, self.top = chart.first_event, max(chart.end_event, chart.first_event + 1), chart.top

    def x(self, event: float) -> float:
        return round(LEFT + (W - RIGHT - LEFT) * (event - self.first) / (self.end - self.first), 1)

    def y(self, n: float) -> float:
        return round(BOTTOM - (BOTTOM - TOP) * min(n, self.top) / self.top, 1)


# ---------------------------------------------------------------- SVG parts


def _grid(sc: Scale, chart: Chart) -> str:
    out = []
    for t in y_ticks(chart.top):
        y = sc.y(t)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y}" y2="{y}" stroke="#e4e9f0"/>'
                   f'<text x="{LEFT - 8}" y="{y + 4}" text-anchor="end" font-size="12" fill="#52606d">'
                   f"{_e(_axis_label(t))}</text>")
    for ev in x_ticks(chart.first_event, chart.end_event - 1):
        x = sc.x(ev)
        out.append(f'<line x1="{x}" x2="{x}" y1="{BOTTOM}" y2="{BOTTOM + 5}" stroke="#52606d"/>'
                   f'<text x="{x}" y="{BOTTOM + 19}" text-anchor="middle" font-size="12" fill="#52606d">{ev:,}</text>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{BOTTOM}" y2="{BOTTOM}" stroke="#52606d"/>'
               f'<text x="{(LEFT + W - RIGHT) / 2}" y="{BOTTOM + 38}" text-anchor="middle" font-size="12.5" '
               'fill="#52606d">op event (position in the step\'s stream of allocations and frees)</text>')
    return "".join(out)


def _stack(sc: Scale, chart: Chart) -> str:
    """One area per category from the baseline to the running total through it, drawn top category
    first so that each lower one covers the part that is not its own: each path needs only its top edge."""
    cols, out = chart.columns, []
    xs = [sc.x(c.start) for c in cols] + [sc.x(chart.end_event)]
    running = [0] * len(cols)
    tops = []
    for cat in chart.categories:
        running = [r + c.by_category.get(cat, 0) for r, c in zip(running, cols)]
        tops.append((cat, list(running)))
    for cat, levels in reversed(tops):
        d = [f"M{xs[0]},{BOTTOM}"]
        for i, level in enumerate(levels):
            d.append(f"V{sc.y(level)}H{xs[i + 1]}")
        d.append(f"V{BOTTOM}Z")
        out.append(f'<path class="area" data-category="{_e(cat)}" d="{"".join(d)}" '
                   f'fill="{CATEGORY_COLORS.get(cat, OTHER_COLOR)}"><title>{_e(cat)}</title></path>')
    return "".join(out)


def _phases(sc: Scale, chart: Chart) -> str:
    """The phase strip above the plot (a label where it fits) and a faint line where each phase starts."""
    cols, out = chart.columns, []
    runs, start = [], 0
    for i in range(1, len(cols) + 1):
        if i == len(cols) or (cols[i].phase, cols[i].iteration) != (cols[start].phase, cols[start].iteration):
            runs.append((cols[start], start, i))
            start = i
    for col, a, b in runs:
        x0, x1 = sc.x(cols[a].start), sc.x(cols[b].start if b < len(cols) else chart.end_event)
        color = PHASE_COLORS.get(col.phase, OTHER_COLOR)
        tip = f"{col.phase}, iteration {col.iteration}, events {cols[a].start:,}-{(cols[b].start if b < len(cols) else chart.end_event) - 1:,}"
        out.append(f'<rect class="phase" x="{x0}" y="{STRIP[0]}" width="{max(x1 - x0, 0.5):.1f}" '
                   f'height="{STRIP[1] - STRIP[0]}" fill="{color}"><title>{_e(tip)}</title></rect>')
        if x1 - x0 >= 7.2 * len(col.phase) + 8:
            out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{STRIP[1] - 5}" text-anchor="middle" font-size="11.5" '
                       f'fill="#fff" font-weight="600">{_e(col.phase)}</text>')
        if a:
            out.append(f'<line x1="{x0}" x2="{x0}" y1="{STRIP[1]}" y2="{BOTTOM}" stroke="#52606d" stroke-opacity="0.35" '
                       'stroke-dasharray="2 3"/>')
    return "".join(out)


def _iterations(sc: Scale, r: Result, chart: Chart) -> str:
    out = []
    for i, ev in enumerate(r.iteration_starts or []):
        if not chart.first_event <= ev < chart.end_event:
            continue
        x = sc.x(ev)
        out.append(f'<line x1="{x}" x2="{x}" y1="{STRIP[0] - 16}" y2="{BOTTOM}" stroke="#1f2933" stroke-width="1.2" '
                   f'stroke-dasharray="5 3"/><text x="{x + 4}" y="{STRIP[0] - 5}" font-size="12" fill="#1f2933">'
                   f"iteration {i + 1} starts (event {ev:,})</text>")
    return "".join(out)


def _reserved(sc: Scale, chart: Chart) -> str:
    cols = chart.columns
    if any(c.reserved is None for c in cols):
        return ""
    xs = [sc.x(c.start) for c in cols] + [sc.x(chart.end_event)]
    d = [f"M{xs[0]},{sc.y(cols[0].reserved)}"] + [f"H{xs[i]}V{sc.y(c.reserved)}" for i, c in enumerate(cols) if i]
    d.append(f"H{xs[-1]}")
    return (f'<path class="reserved" d="{"".join(d)}" fill="none" stroke="{RESERVED_COLOR}" stroke-width="1.6" '
            'stroke-dasharray="1.5 2.5"/>')


def _capacity(sc: Scale, chart: Chart) -> str:
    if not chart.capacity or chart.capacity > chart.top:
        return ""
    y = sc.y(chart.capacity)
    return (f'<rect class="over-capacity" x="{LEFT}" y="{TOP}" width="{W - RIGHT - LEFT}" height="{max(y - TOP, 0)}" '
            f'fill="{CAPACITY_COLOR}" fill-opacity="0.07"/><line class="capacity" x1="{LEFT}" x2="{W - RIGHT}" y1="{y}" '
            f'y2="{y}" stroke="{CAPACITY_COLOR}" stroke-width="2" stroke-dasharray="7 4"/>')


def _right_labels(sc: Scale, r: Result, chart: Chart) -> str:
    """The capacity and reserved lines named in the right margin, at their height (nudged apart)."""
    x = W - RIGHT + 8
    items = []
    if chart.capacity:
        name = r.device.gpu_name if r.device else "GPU"
        off = chart.capacity > chart.top  # more than twice the highest point: named at the top, not drawn
        items.append(Label(x - 7, sc.y(chart.capacity), f"capacity {human_bytes(chart.capacity)}" + (" \u2191" if off else ""),
                           CAPACITY_COLOR, "above the scale" if off else _short_gpu(name), size=12,
                           sub_size=10.5))
    reserved = [c.reserved for c in chart.columns if c.reserved is not None]
    if reserved and len(reserved) == len(chart.columns):
        items.append(Label(x - 7, sc.y(max(reserved)), f"reserved {human_bytes(max(reserved))}", RESERVED_COLOR,
                           "caching allocator, highest", size=12, sub_size=10.5))
    out = []
    for label in place(items, (W - RIGHT + 2, TOP - 4, W - 2, BOTTOM + 8), step=4):
        out.append(_label_svg(label, leader=False))
    return "".join(out)


def _short_gpu(name: str) -> str:
    return name.replace("NVIDIA ", "")[:20]


def _label_svg(label: Label, leader: bool = True) -> str:
    x0, y0, x1, y1 = label.box
    parts = []
    if leader:  # a thin line from the point to the nearest corner of the box's baseline
        lx = min(max(label.x, x0), x1)
        ly = y1 if label.y > y1 else y0
        if abs(lx - label.x) > 10 or abs(ly - label.y) > 12:
            parts.append(f'<line x1="{label.x}" y1="{label.y}" x2="{lx:.1f}" y2="{ly:.1f}" stroke="{label.color}" '
                         'stroke-width="0.9"/>')
    halo = 'stroke="#fff" stroke-width="3.5" paint-order="stroke" stroke-linejoin="round"'
    parts.append(f'<text x="{x0:.1f}" y="{y0 + label.size * 0.85:.1f}" font-size="{label.size}" font-weight="700" '
                 f'fill="{label.color}" {halo}>{_e(label.text)}</text>')
    if label.sub:
        parts.append(f'<text x="{x0:.1f}" y="{y1 - label.sub_size * 0.15:.1f}" font-size="{label.sub_size}" '
                     f'fill="#3e4c59" {halo}>{_e(label.sub)}</text>')
    box = " ".join(f"{v:.1f}" for v in label.box)
    return f'<g class="label" data-box="{box}">{"".join(parts)}</g>'


def _peak_labels(sc: Scale, r: Result, chart: Chart, taken: list) -> tuple[str, list[Label]]:
    """The steady-state peak, then each other phase's peak of the last iteration, highest first."""
    s = r.steady_state_peak
    wanted = [(s, f"peak {human_bytes(s.bytes)}", STEADY_COLOR, 13.5)]
    others = [p for p in r.phase_peaks if p.event != s.event and chart.first_event <= p.event < chart.end_event]
    near = 0.01 * (chart.end_event - chart.first_event)  # peaks this close and of equal bytes share one label
    groups: list[list] = []
    for p in sorted(others, key=lambda p: (-p.bytes, p.event)):
        if groups and groups[-1][0].bytes == p.bytes and abs(groups[-1][0].event - p.event) <= near:
            groups[-1].append(p)
        else:
            groups.append([p])
    wanted += [(g[0], f"{' and '.join(p.phase for p in g)} peak {human_bytes(g[0].bytes)}", "#1f2933", 12)
               for g in groups]
    markers, labels = [], []
    for p, text, color, size in wanted:
        if not chart.first_event <= p.event < chart.end_event:
            continue
        x, y = sc.x(p.event), sc.y(p.bytes)
        where = f"{p.phase}, {p.module or '(top level)'}, {(p.op or '-').removeprefix('aten.')}"
        labels.append(Label(x, y, text, color, where[:60], size=size))
        tip = f"{text} ({p.bytes:,} B) at event {p.event:,}, iteration {p.iteration}, {where}"
        markers.append(f'<circle class="peak" cx="{x}" cy="{y}" r="{5 if color == STEADY_COLOR else 3.5}" '
                       f'fill="{color}" stroke="#fff" stroke-width="1.5" data-bytes="{p.bytes}"><title>{_e(tip)}'
                       "</title></circle>")
    dots = [(lb.x - 5, lb.y - 5, lb.x + 5, lb.y + 5) for lb in labels]
    placed = place(labels, (LEFT + 2, TOP - 2, W - RIGHT - 2, BOTTOM - 2), taken=dots + _line_boxes(sc, chart) + taken)
    return "".join(markers) + "".join(_label_svg(lb) for lb in placed), placed


def _line_boxes(sc: Scale, chart: Chart) -> list[tuple[float, float, float, float]]:
    """Thin boxes over the capacity line and the flat runs of the reserved line, for labels to keep off."""
    boxes = []
    if chart.capacity and chart.capacity <= chart.top:
        y = sc.y(chart.capacity)
        boxes.append((LEFT, y - 1, W - RIGHT, y + 1))
    cols = chart.columns
    if cols and all(c.reserved is not None for c in cols):
        start = 0
        for i in range(1, len(cols) + 1):
            if i == len(cols) or sc.y(cols[i].reserved) != sc.y(cols[start].reserved):
                x1 = sc.x(cols[i].start if i < len(cols) else chart.end_event)
                y = sc.y(cols[start].reserved)
                boxes.append((sc.x(cols[start].start), y - 1, x1, y + 1))
                start = i
    return boxes


def _oom(sc: Scale, r: Result, chart: Chart) -> tuple[str, list]:
    """A red line where the capped replay ran out, if on the chart, and its label's box (for the others to avoid)."""
    ev = r.device.oom_event if r.device else None
    if ev is None or not chart.first_event <= ev < chart.end_event:
        return "", []
    x, text = sc.x(ev), f"out of memory here (event {ev:,})"
    width = text_width(text, 12)
    x0 = x - 4 - width if x - 4 - width >= LEFT else x + 4
    box = (x0, BOTTOM - 20, x0 + width, BOTTOM - 6)
    svg = (f'<line class="oom" x1="{x}" x2="{x}" y1="{TOP}" y2="{BOTTOM}" stroke="{CAPACITY_COLOR}" stroke-width="2"/>'
           f'<text x="{x0:.1f}" y="{BOTTOM - 8}" font-size="12" font-weight="700" fill="{CAPACITY_COLOR}" '
           f'stroke="#fff" stroke-width="3.5" paint-order="stroke">{_e(text)}</text>')
    return svg, [box, (x - 1, TOP, x + 1, BOTTOM)]


def timeline_svg(r: Result) -> tuple[str, Chart]:
    chart = chart_of(r)
    sc = Scale(chart)
    oom, oom_boxes = _oom(sc, r, chart)
    peaks, _ = _peak_labels(sc, r, chart, oom_boxes)
    svg = (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" '
           'aria-label="allocated bytes by category over the op events of the steady state">'
           f'<rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>'
           f"{_stack(sc, chart)}{_grid(sc, chart)}{_capacity(sc, chart)}{_phases(sc, chart)}{_iterations(sc, r, chart)}"
           f"{_reserved(sc, chart)}{oom}{peaks}{_right_labels(sc, r, chart)}"
           f'<line class="cursor" x1="0" x2="0" y1="{TOP}" y2="{BOTTOM}" stroke="#1f2933" visibility="hidden"/></svg>')
    return svg, chart


def legend(chart: Chart) -> str:
    items = [f'<span><i class="swatch" style="background:{CATEGORY_COLORS.get(c, OTHER_COLOR)}"></i>{_e(c)}</span>'
             for c in reversed(chart.categories)]
    if chart.capacity and chart.capacity <= chart.top:
        items.append(f'<span><i class="dash" style="border-color:{CAPACITY_COLOR}"></i>GPU capacity</span>')
    if chart.columns and all(c.reserved is not None for c in chart.columns):
        items.append(f'<span><i class="dots" style="border-color:{RESERVED_COLOR}"></i>reserved (allocator replay)</span>')
    return f'<div class="legend">{"".join(items)}</div>'


def caption(r: Result, chart: Chart) -> str:
    starts = r.iteration_starts or []
    if len(starts) >= 2 and chart.first_event >= starts[1]:
        iterations = "iteration 2" if len(starts) == 2 else f"iterations 2 to {len(starts)}"
        span = f"the steady state ({iterations}, events {chart.first_event:,} to {chart.end_event - 1:,})"
        first = r.first_iteration_peak
        rest = (f" Iteration 1, left out, peaks at {human_bytes(first.bytes)} ({first.phase}, event {first.event:,}) "
                "while it creates the optimizer state.")
    else:
        span, rest = f"the whole run (events {chart.first_event:,} to {chart.end_event - 1:,})", ""
    return (f"Allocated bytes over {span}, stacked by category. Each of the {len(chart.columns)} columns is the "
            "highest point of its events, so no peak is lost; hover for the split." + rest + _oom_words(r, chart))


def _oom_words(r: Result, chart: Chart) -> str:
    """Where the capped replay ran out, in words, and what the reserved line then shows."""
    ev = r.device.oom_event if r.device else None
    if ev is None:
        return ""
    before = [p for p in r.timeline if p.event <= ev]
    at = f" ({before[-1].phase} of iteration {before[-1].iteration})" if before and before[-1].iteration else (
        f" ({before[-1].phase}, before the first iteration)" if before else "")
    where = "marked in red" if chart.first_event <= ev < chart.end_event else "before this chart"
    return (f" On this GPU the caching allocator runs out at event {ev:,}{at}, {where}; the reserved line is the "
            "replay without the capacity limit: what the step would reserve on a card large enough.")


def timeline_figure(r: Result) -> str:
    """The figure: the SVG, its legend, the hover tooltip and script."""
    svg, chart = timeline_svg(r)
    sc = Scale(chart)
    return (f'<p class="muted">{_e(caption(r, chart))}</p>'
            f'<figure id="timeline" class="chart">{svg}<div class="tip" role="status"></div></figure>{legend(chart)}'
            f'<script type="application/json" id="timeline-data">{_hover(sc, chart)}</script>'
            f"<script>{HOVER_JS}</script>")


def _hover(sc: Scale, chart: Chart) -> str:
    xs = [sc.x(c.start) for c in chart.columns] + [sc.x(chart.end_event)]
    colors = [CATEGORY_COLORS.get(c, OTHER_COLOR) for c in chart.categories]
    return hover_data(chart, xs, colors, {"left": LEFT, "right": W - RIGHT, "top": TOP, "bottom": BOTTOM, "w": W})
