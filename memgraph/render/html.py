"""Self-contained HTML report of a :class:`~memgraph.analysis.result.Result`.

One file, inline CSS, no JavaScript and no external resources. Its text and tables are the
sections of the text report (``sections.build(result, depth)``), each laid out by one function,
:func:`render_section`. Around them sit views only HTML can draw, each read from the Result and
adding no sentence or table of its own: the option chips, the two peak cards, the inline SVG
timeline (phase bands, iteration markers, the two peaks) and the category stack bar.
Every string is escaped (model names, module paths and op names are user input).
"""

from __future__ import annotations

from html import escape

from memgraph.analysis.result import Peak, Result, TimelinePoint
from memgraph.render import sections
from memgraph.render.sections import Section
from memgraph.units import human_bytes, share

PHASE_COLORS = {
    "setup": "#9aa5b1",
    "forward": "#3b82c4",
    "backward": "#8e5cc2",
    "optimizer": "#d9822b",
    "zero_grad": "#2f9e6e",
}
OTHER_COLOR = "#b0b0b0"
CATEGORY_COLORS = {
    "parameters": "#3b82c4",
    "buffers": "#7fb3e0",
    "inputs": "#9aa5b1",
    "gradients": "#8e5cc2",
    "optimizer_state": "#d9822b",
    "autocast_cache": "#e0b33a",
    "activations": "#2f9e6e",
    "temporaries": "#c9485b",
    "workspaces": "#17a2b8",
}
STEADY_COLOR = "#c62828"
FIRST_COLOR = "#ef8f00"

CSS = """
:root { --ink: #1f2933; --muted: #616e7c; --line: #d9e2ec; --soft: #f5f7fa; --accent: #c62828; }
* { box-sizing: border-box; }
body { margin: 0; background: #eef1f5; color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 20px 40px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 0 0 16px; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 16px; margin: 0 0 10px; }
p { margin: 6px 0; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre.lines { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0 0 8px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.kv dt { color: var(--muted); }
dl.kv dd { margin: 0; overflow-wrap: anywhere; }
.chips { margin: 8px 0 0; }
.chip { display: inline-block; background: var(--soft); border: 1px solid var(--line); border-radius: 10px;
  padding: 0 8px; margin: 1px 4px 1px 0; font-size: 12.5px; }
.peaks { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.peak { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; }
.peak.steady { border: 2px solid var(--accent); background: #fff7f7; }
.peak .big { font-size: 28px; font-weight: 650; margin: 2px 0 0; }
.peak .exact { color: var(--muted); font-size: 12.5px; margin: 0 0 8px; }
.badge { display: inline-block; background: var(--accent); color: #fff; border-radius: 4px;
  font-size: 11px; padding: 1px 6px; margin-left: 6px; vertical-align: 2px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 8px 0 0; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.scroll { overflow-x: auto; }
tr.total td { font-weight: 650; border-top: 2px solid var(--ink); border-bottom: none; }
.stack { display: flex; height: 18px; border-radius: 4px; overflow: hidden; margin: 8px 0 4px; }
.stack span { display: block; height: 18px; }
.legend { font-size: 12.5px; color: var(--muted); }
.legend span { margin-right: 14px; white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; }
figure { margin: 0; }
svg.timeline { width: 100%; max-width: 900px; height: auto; display: block; margin: 0 auto; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
footer { color: var(--muted); font-size: 12.5px; text-align: center; }
@media (max-width: 760px) { .peaks { grid-template-columns: 1fr; } }
"""


def _e(value) -> str:
    return escape(str(value), quote=True)


def _module(path: str) -> str:
    return path or "(top level)"


def _breakable(text: str) -> str:
    """Escaped text that may wrap after its dots (module paths, op names)."""
    return _e(text).replace(".", ".<wbr>")


# ---------------------------------------------------------------- one Section as HTML


def render_section(s: Section, heading: str = "h2", view: str = "") -> str:
    """A section of the text report as HTML: its title, its lines, an HTML-only ``view``, its table."""
    anchor = f' id="{_e(s.key)}"' if s.key else ""
    return f"<section{anchor}><{heading}>{_e(s.title)}</{heading}>{_lines(s)}{view}{_table(s)}</section>"


def _lines(s: Section) -> str:
    if not s.lines:
        return ""
    if s.preformatted:  # aligned with spaces: keep them
        return f'<pre class="lines">{_e(chr(10).join(s.lines))}</pre>'
    return "".join(f"<p>{_e(line)}</p>" for line in s.lines if line)


def _table(s: Section) -> str:
    """The section's table: numeric columns right-aligned, the total row (if any) styled as a total."""
    if not s.rows:
        return ""

    def cells(row: list, tag: str) -> str:
        return "".join(f'<{tag} class="num">{_e(c)}</{tag}>' if i in s.numeric else f"<{tag}>{_breakable(c)}</{tag}>"
                       for i, c in enumerate(row))

    total_at = len(s.rows) - 1 if s.total else -1
    body = "".join(('<tr class="total">' if i == total_at else "<tr>") + f"{cells(row, 'td')}</tr>"
                   for i, row in enumerate(s.rows))
    return (f'<div class="scroll"><table><thead><tr>{cells(s.headers, "th")}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


# ---------------------------------------------------------------- HTML-only views: chips, peak cards, stack bar


def _options_chips(options: dict) -> str:
    chips = []
    for key, value in options.items():
        if value is None or value == [] or value == () or value == "" or value == {}:
            continue
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        chips.append(f'<span class="chip">{_e(key)} = {_e(value)}</span>')
    return f'<div class="chips">{"".join(chips)}</div>' if chips else ""


def _peak_card(p: Peak, title: str, cls: str) -> str:
    badge = '<span class="badge">the one that matters</span>' if cls == "steady" else ""
    facts = [("iteration", p.iteration), ("phase", p.phase), ("module", _module(p.module)),
             ("op", p.op or "-"), ("event", f"{p.event:,}")]
    items = "".join(f"<dt>{k}</dt><dd><code>{_breakable(v)}</code></dd>" for k, v in facts)
    return (f'<div class="peak {cls}"><h2>{title}{badge}</h2><p class="big">{_e(human_bytes(p.bytes))}</p>'
            f'<p class="exact">{p.bytes:,} bytes</p><dl class="kv">{items}</dl></div>')


def _peaks(r: Result) -> str:
    note = sections.PHASE_NOTE[:1].upper() + sections.PHASE_NOTE[1:]
    return (f'<section id="peaks"><h2>Peaks</h2><p class="muted">{_e(note)}.</p>'
            f'<div class="peaks">{_peak_card(r.steady_state_peak, "Steady-state peak", "steady")}'
            f'{_peak_card(r.first_iteration_peak, "First-iteration peak", "first")}</div></section>')


def _stack(p: Peak) -> str:
    """The steady-state peak as one bar of categories, with its legend."""
    items = [(c, b) for c, b in p.by_category.items() if b > 0]
    rest = p.bytes - sum(p.by_category.values())
    if rest > 0:
        items.append(("unattributed", rest))
    if not p.bytes or not items:
        return ""
    color = {c: CATEGORY_COLORS.get(c, OTHER_COLOR) for c, _ in items}
    bar = "".join(f'<span style="width:{100 * b / p.bytes:.3f}%;background:{color[c]}" '
                  f'title="{_e(c)} {_e(share(b, p.bytes))}"></span>' for c, b in items)
    legend = "".join(f'<span><i class="swatch" style="background:{color[c]}"></i>{_e(c)}</span>' for c, _ in items)
    return f'<div class="stack">{bar}</div><div class="legend">{legend}</div>'


# ---------------------------------------------------------------- timeline (inline SVG)

W, H = 900, 320
LEFT, RIGHT, TOP, BOTTOM = 78, 18, 34, 252  # plot area: x in [LEFT, W - RIGHT], y in [TOP, BOTTOM]


def _y_ticks(top: float) -> list[float]:
    """4-5 gridlines at round values in the binary unit human_bytes would pick for ``top``."""
    unit = 1.0
    while top / unit >= 1024 and unit < 1024**4:
        unit *= 1024
    v = max(top / unit, 1e-9)
    decade = 10.0 ** (len(str(int(v))) - 1) / 10 if v >= 1 else 0.1
    while True:
        for m in (1, 2, 2.5, 5):
            step = m * decade
            if -(-v // step) <= 5:
                n = int(-(-v // step))
                return [i * step * unit for i in range(max(n, 1) + 1)]
        decade *= 10


def _x_ticks(last: int) -> list[int]:
    if last <= 0:
        return [0]
    decade = 10 ** (len(str(last)) - 1)
    for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 5):
        step = max(1, int(m * decade))
        if last // step <= 7:
            return list(range(0, last + 1, step))
    return [0, last]


def _axis_label(n: float) -> str:
    return human_bytes(n).replace(".00 ", " ")


class _Scale:
    def __init__(self, last_event: int, top: float):
        self.last, self.top = max(last_event, 1), max(top, 1.0)

    def x(self, event: float) -> float:
        return round(LEFT + (W - RIGHT - LEFT) * event / self.last, 1)

    def y(self, n: float) -> float:
        return round(BOTTOM - (BOTTOM - TOP) * n / self.top, 1)


def _runs(points: list[TimelinePoint]) -> list[tuple[str, int, int]]:
    """Consecutive points of one phase: (phase, first index, end index exclusive)."""
    runs, start = [], 0
    for i in range(1, len(points) + 1):
        if i == len(points) or points[i].phase != points[start].phase:
            runs.append((points[start].phase, start, i))
            start = i
    return runs


def _svg_grid(sc: _Scale, ticks: list[float]) -> str:
    out = []
    for t in ticks:
        y = sc.y(t)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y}" y2="{y}" stroke="#d9e2ec"/>'
                   f'<text x="{LEFT - 8}" y="{y + 4}" text-anchor="end" font-size="11" fill="#616e7c">'
                   f"{_e(_axis_label(t))}</text>")
    for ev in _x_ticks(sc.last):
        x = sc.x(ev)
        out.append(f'<line x1="{x}" x2="{x}" y1="{BOTTOM}" y2="{BOTTOM + 4}" stroke="#616e7c"/>'
                   f'<text x="{x}" y="{BOTTOM + 17}" text-anchor="middle" font-size="11" fill="#616e7c">{ev:,}</text>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{BOTTOM}" y2="{BOTTOM}" stroke="#616e7c"/>'
               f'<text x="{(LEFT + W - RIGHT) / 2}" y="{BOTTOM + 33}" text-anchor="middle" font-size="11.5" '
               'fill="#616e7c">event (op index)</text>')
    return "".join(out)


def _svg_phases(sc: _Scale, points: list[TimelinePoint]) -> str:
    """A faint full-height band per phase run and the area under the curve in the phase's colour."""
    out = []
    for phase, a, b in _runs(points):
        x0 = sc.x(points[a].event)
        x1 = sc.x(points[b].event if b < len(points) else sc.last)
        color = PHASE_COLORS.get(phase, OTHER_COLOR)
        tip = f"{phase}, iteration {points[a].iteration}, events {points[a].event:,}-{points[b - 1].event:,}"
        out.append(f'<rect x="{x0}" y="{TOP}" width="{max(x1 - x0, 0.5):.1f}" height="{BOTTOM - TOP}" '
                   f'fill="{color}" fill-opacity="0.08"><title>{_e(tip)}</title></rect>')
        d = [f"M{x0},{BOTTOM}"]
        for i in range(a, b):
            nxt = sc.x(points[i + 1].event) if i + 1 < len(points) else x1
            d.append(f"V{sc.y(points[i].bytes)}H{nxt}")
        d.append(f"V{BOTTOM}Z")
        out.append(f'<path d="{"".join(d)}" fill="{color}" fill-opacity="0.35"/>')
    return "".join(out)


def _svg_line(sc: _Scale, points: list[TimelinePoint]) -> str:
    """The step line: each point's bytes hold until the next point."""
    d = [f"M{sc.x(points[0].event)},{sc.y(points[0].bytes)}"]
    for p in points[1:]:
        d.append(f"H{sc.x(p.event)}V{sc.y(p.bytes)}")
    d.append(f"H{sc.x(sc.last)}")
    return f'<path d="{"".join(d)}" fill="none" stroke="#1f2933" stroke-width="1.3" stroke-linejoin="round"/>'


def _svg_iterations(sc: _Scale, r: Result) -> str:
    out = []
    by_event = {p.event: p.iteration for p in r.timeline}
    for i, ev in enumerate(getattr(r, "iteration_starts", None) or []):
        x = sc.x(ev)
        label = f"iteration {by_event.get(ev, i + 1)}"
        out.append(f'<line x1="{x}" x2="{x}" y1="{TOP - 14}" y2="{BOTTOM}" stroke="#52606d" stroke-width="1" '
                   f'stroke-dasharray="4 3"><title>{_e(label)} starts at event {ev:,}</title></line>'
                   f'<text x="{x + 4}" y="{TOP - 5}" font-size="11" fill="#52606d">{_e(label)}</text>')
    return "".join(out)


def _peak_label(sc: _Scale, p: Peak, name: str) -> tuple[str, float, str, float, float]:
    """The label text, its x and anchor, and its estimated horizontal extent."""
    text = f"{name} {human_bytes(p.bytes)}"
    x, width = sc.x(p.event), 6.9 * len(text)
    if x > LEFT + 0.55 * (W - RIGHT - LEFT):
        return text, x - 8, "end", x - 8 - width, x - 8
    return text, x + 8, "start", x + 8, x + 8 + width


def _svg_peak(sc: _Scale, p: Peak, name: str, color: str, lift: int) -> str:
    x, y = sc.x(p.event), sc.y(p.bytes)
    label, tx, anchor, _, _ = _peak_label(sc, p, name)
    tip = (f"{name}: {human_bytes(p.bytes)} ({p.bytes:,} B) at event {p.event:,}, iteration {p.iteration}, "
           f"{p.phase}, module {_module(p.module)}, op {p.op or '-'}")
    return (f'<g><title>{_e(tip)}</title>'
            f'<line x1="{x}" x2="{x}" y1="{y}" y2="{BOTTOM}" stroke="{color}" stroke-width="1" stroke-opacity="0.6"/>'
            f'<circle cx="{x}" cy="{y}" r="4.5" fill="{color}" stroke="#fff" stroke-width="1.5"/>'
            f'<text x="{tx}" y="{max(y - 7 - lift, 12)}" text-anchor="{anchor}" font-size="12" font-weight="600" '
            f'fill="{color}" stroke="#fff" stroke-width="3" paint-order="stroke">{_e(label)}</text></g>')


def _lift(sc: _Scale, steady: Peak, first: Peak, top: int) -> int:
    """How far to raise the first-iteration label so it does not overlap the steady-state one (x scale only)."""
    _, _, _, a0, a1 = _peak_label(sc, steady, "steady-state peak")
    _, _, _, b0, b1 = _peak_label(sc, first, "first-iteration peak")
    overlap = a0 < b1 + 6 and b0 < a1 + 6
    return 16 if overlap and abs(steady.bytes - first.bytes) < 0.08 * top else 0


def _svg_legend(phases: list[str]) -> str:
    out, x = [], LEFT
    for phase in phases:
        color = PHASE_COLORS.get(phase, OTHER_COLOR)
        out.append(f'<rect x="{x}" y="{H - 16}" width="12" height="12" rx="2" fill="{color}" fill-opacity="0.6"/>'
                   f'<text x="{x + 17}" y="{H - 6}" font-size="11.5" fill="#1f2933">{_e(phase)}</text>')
        x += 34 + 6.3 * len(phase)
    for name, color in (("steady-state peak", STEADY_COLOR), ("first-iteration peak", FIRST_COLOR)):
        out.append(f'<circle cx="{x + 6}" cy="{H - 10}" r="4.5" fill="{color}"/>'
                   f'<text x="{x + 15}" y="{H - 6}" font-size="11.5" fill="#1f2933">{name}</text>')
        x += 34 + 6.3 * len(name)
    return "".join(out)


def _timeline_svg(r: Result) -> str:
    points = sorted(r.timeline, key=lambda p: p.event)
    s, f = r.steady_state_peak, r.first_iteration_peak
    top = max([p.bytes for p in points] + [s.bytes, f.bytes, 1])
    sc = _Scale(max([p.event for p in points] + [s.event, f.event]), top)
    lift = _lift(sc, s, f, top)
    ticks = _y_ticks(top * (1.2 if lift else 1.1))  # headroom for the peak labels
    sc.top = ticks[-1]
    phases = [p for p in PHASE_COLORS if any(q.phase == p for q in points)]
    phases += sorted({q.phase for q in points} - set(phases))
    return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" '
            f'width="{W}" height="{H}" role="img" aria-label="allocated bytes over op events">'
            f'<rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>'
            f"{_svg_phases(sc, points)}{_svg_grid(sc, ticks)}{_svg_line(sc, points)}{_svg_iterations(sc, r)}"
            f'{_svg_peak(sc, f, "first-iteration peak", FIRST_COLOR, lift)}'
            f'{_svg_peak(sc, s, "steady-state peak", STEADY_COLOR, 0)}{_svg_legend(phases)}</svg>')


def _timeline(r: Result) -> str:
    if not r.timeline:
        return '<section><h2>Memory timeline</h2><p class="muted">No timeline recorded.</p></section>'
    return ("<section><h2>Memory timeline</h2><p class=\"muted\">Allocated bytes after each op event (the highest "
            "point of each sampled bucket, so peaks survive), coloured by phase; dashed lines mark where each "
            f"iteration starts. Hover a peak for details.</p><figure>{_timeline_svg(r)}</figure></section>")


# ---------------------------------------------------------------- the page


def _versions(r: Result) -> str:
    parts = [f"{_e(k)} {_e(v)}" for k, v in (r.versions or {}).items()]
    parts.append(f"schema {_e(r.schema_version)}")
    return f"<footer>Generated by memgraph &middot; {' &middot; '.join(parts)}</footer>"


def render_html(result: Result, depth: int = 3) -> str:
    """The whole report as one self-contained HTML document.

    The sections of the text report in their order, each with its HTML-only view (option chips
    under the summary, the stack bar in the breakdown); the peak cards and the timeline follow
    the summary.
    """
    r = result
    views = {"summary": _options_chips(r.options or {}), "breakdown": _stack(r.steady_state_peak)}
    parts = []
    for i, s in enumerate(sections.build(r, depth)):
        parts.append(render_section(s, "h1" if i == 0 else "h2", views.get(s.key, "")))
        if i == 0:
            parts += [_peaks(r), _timeline(r)]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>memgraph: {_e(r.model)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}{_versions(r)}</main></body></html>\n")
