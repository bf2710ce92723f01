"""Self-contained HTML report of a :class:`~memgraph.analysis.result.Result`.

One file, inline CSS, no JavaScript and no external resources. It renders, in order: a header
(model, target, the counter the peaks predict, options, batch, optimizer, parameter counts); the
steady-state and first-iteration peaks; an inline SVG timeline of allocated bytes over op events
with phase bands, iteration markers and the two peaks; what is alive at the steady-state peak by
category (with the bytes held past their last use); the largest tensors at that peak; the
per-module table; the static totals; ops without a registry entry; notes; versions.
Every string taken from the result is escaped (model names, module paths and op names are user input).
"""

from __future__ import annotations

from html import escape

from memgraph.analysis.group_by import at_depth
from memgraph.analysis.result import Peak, Result, TimelinePoint
from memgraph.render import sections
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
.fits { color: #2f7d4f; font-weight: 600; } .nofit { color: var(--accent); }
body { margin: 0; background: #eef1f5; color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 20px 40px; }
section, header.top { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 16px 20px; margin: 0 0 16px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 0 0 10px; }
p { margin: 6px 0; }
.sub { color: var(--muted); margin: 0 0 12px; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
code { font: 12.5px/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.kv dt { color: var(--muted); }
dl.kv dd { margin: 0; word-break: break-word; }
.chip { display: inline-block; background: var(--soft); border: 1px solid var(--line); border-radius: 10px;
  padding: 0 8px; margin: 1px 4px 1px 0; font-size: 12.5px; }
.peaks { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.peak { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; }
.peak.steady { border: 2px solid var(--accent); background: #fff7f7; }
.peak .big { font-size: 28px; font-weight: 650; margin: 2px 0 0; }
.peak .exact { color: var(--muted); font-size: 12.5px; margin: 0 0 8px; }
.badge { display: inline-block; background: var(--accent); color: #fff; border-radius: 4px;
  font-size: 11px; padding: 1px 6px; margin-left: 6px; vertical-align: 2px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { overflow-wrap: break-word; }
.scroll { overflow-x: auto; }
.nw { white-space: nowrap; }
tr.total td { font-weight: 650; border-top: 2px solid var(--ink); border-bottom: none; }
.bar { background: var(--soft); height: 10px; border-radius: 3px; min-width: 120px; }
.bar span { display: block; height: 10px; border-radius: 3px; }
.stack { display: flex; height: 18px; border-radius: 4px; overflow: hidden; margin: 4px 0 12px; }
.stack span { display: block; height: 18px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
.callout { background: #fff8e6; border-left: 4px solid #ef8f00; padding: 8px 12px; margin: 12px 0 0; }
figure { margin: 0; }
svg.timeline { width: 100%; max-width: 900px; height: auto; display: block; margin: 0 auto; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
ul.ops { columns: 3; column-gap: 24px; padding-left: 18px; margin: 8px 0 0; }
footer { color: var(--muted); font-size: 12.5px; text-align: center; }
@media (max-width: 760px) { .peaks { grid-template-columns: 1fr; } ul.ops { columns: 1; } }
"""


class _Html(str):
    """A table cell that is already HTML (everything else is escaped)."""


def _e(value) -> str:
    return escape(str(value), quote=True)


def _module(path: str) -> str:
    return path or "(top level)"


def _dotted(name: str) -> _Html:
    """An escaped dotted name (module path, op) that may wrap after its dots."""
    return _Html(_e(name).replace(".", ".<wbr>"))


def _table(headers: list[str], rows: list[list], numeric: set[int] = frozenset(), total: list | None = None) -> str:
    """A table; columns whose index is in ``numeric`` are right-aligned."""

    def cells(row, tag):
        out = []
        for i, c in enumerate(row):
            cls = ' class="num"' if i in numeric else (' class="name"' if i == 0 and tag == "td" else "")
            out.append(f"<{tag}{cls}>{c if isinstance(c, _Html) else _e(c)}</{tag}>")
        return "".join(out)

    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    if total is not None:
        body += f'<tr class="total">{cells(total, "td")}</tr>'
    return (f'<div class="scroll"><table><thead><tr>{cells(headers, "th")}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


# ---------------------------------------------------------------- header and peaks


def _options_chips(options: dict) -> str:
    chips = []
    for key, value in options.items():
        if value is None or value == [] or value == "" or value == {}:
            continue
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        chips.append(f'<span class="chip">{_e(key)} = {_e(value)}</span>')
    return "".join(chips) or '<span class="muted">-</span>'


def _header(r: Result) -> str:
    o = r.options or {}
    frozen = r.parameters - r.trainable_parameters
    optimizer = f"{o.get('optimizer', '?')} ({r.optimizer_impl} implementation)"
    rows = [
        ("target", f"{_e(r.target)} &mdash; the peaks predict <code>{_e(r.metric)}</code>"),
        ("batch", "".join(f'<span class="chip"><code>{_e(b)}</code></span>' for b in r.batch) or "-"),
        ("optimizer", _e(optimizer)),
        ("parameters", f"{r.parameters:,} ({r.trainable_parameters:,} trainable, {frozen:,} frozen)"),
        ("options", _options_chips(o)),
    ]
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return (f'<header class="top"><h1>memgraph memory report</h1><p class="sub">{_e(r.model)}</p>'
            f'<dl class="kv">{items}</dl></header>')


def _peak_card(p: Peak, title: str, cls: str, extra: str = "") -> str:
    badge = '<span class="badge">the one that matters</span>' if cls == "steady" else ""
    facts = [("iteration", p.iteration), ("phase", p.phase), ("module", _module(p.module)),
             ("op", p.op or "-"), ("event", f"{p.event:,}")]
    items = "".join(f"<dt>{k}</dt><dd><code>{_e(v)}</code></dd>" for k, v in facts)
    return (f'<div class="peak {cls}"><h2>{title}{badge}</h2><p class="big">{_e(human_bytes(p.bytes))}</p>'
            f'<p class="exact">{p.bytes:,} bytes{extra}</p><dl class="kv">{items}</dl></div>')


def _peaks(r: Result) -> str:
    s, f = r.steady_state_peak, r.first_iteration_peak
    diff = f.bytes - s.bytes
    extra = "" if diff == 0 else f" ({'+' if diff > 0 else '-'}{human_bytes(abs(diff))} vs steady state)"
    return ('<section><h2>Peaks</h2><p>The <b>steady-state</b> peak (iteration 2 onwards) is the one that '
            "matters: every later iteration repeats it, so it is what a long run needs. The first iteration "
            "can differ because it creates the optimizer state and other lazily allocated memory.</p>"
            f'<div class="peaks">{_peak_card(s, "Steady-state peak", "steady")}'
            f'{_peak_card(f, "First-iteration peak", "first", extra)}</div></section>')


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


# ---------------------------------------------------------------- tables


def _breakdown(p: Peak) -> str:
    items = [(c, b) for c, b in p.by_category.items() if b]
    rest = p.bytes - sum(b for _, b in p.by_category.items())
    if rest:
        items.append(("unattributed", rest))
    stack = "".join(f'<span style="width:{100 * b / p.bytes:.3f}%;background:{CATEGORY_COLORS.get(c, OTHER_COLOR)}" '
                    f'title="{_e(c)} {_e(share(b, p.bytes))}"></span>' for c, b in items if p.bytes and b > 0)
    rows = [[_Html(f'<span class="swatch" style="background:{CATEGORY_COLORS.get(c, OTHER_COLOR)}"></span>{_e(c)}'),
             human_bytes(b), f"{b:,}", share(b, p.bytes), _bar(b, p.bytes, CATEGORY_COLORS.get(c, OTHER_COLOR))]
            for c, b in items]
    total = ["total", human_bytes(p.bytes), f"{p.bytes:,}", share(p.bytes, p.bytes), ""]
    table = _table(["category", "size", "bytes", "share", ""], rows, {1, 2, 3}, total)
    return (f"<section><h2>Alive at the steady-state peak ({_e(human_bytes(p.bytes))})</h2>"
            f'<div class="stack">{stack}</div>{table}{_held(p)}</section>')


def _bar(part: int, whole: int, color: str) -> _Html:
    width = max(0.0, min(100.0, 100 * part / whole)) if whole else 0.0
    return _Html(f'<div class="bar"><span style="width:{width:.2f}%;background:{color}"></span></div>')


def _held(p: Peak) -> str:
    held = p.held_past_last_use_bytes
    if not held:
        return '<p class="muted">Nothing alive at the peak is held past its last use.</p>'
    return (f'<p class="callout"><b>{_e(human_bytes(held))}</b> ({_e(share(held, p.bytes))} of the peak) is held '
            "past its last use: alive at the peak although no later op reads them. These are the tensors a "
            "program could free earlier to lower the peak.</p>")


def _top_tensors(p: Peak) -> str:
    if not p.top_tensors:
        return ""
    rows = [[_dotted(t.name), t.category, _dotted(_module(t.module)),
             _Html(f'<span class="nw">{_e(t.phase)}, iter {t.iteration}</span>'),
             "\u00d7".join(map(str, t.shape)) or "scalar", t.dtype, human_bytes(t.bytes), share(t.bytes, p.bytes),
             "yes" if t.held_past_last_use else ""] for t in p.top_tensors]
    headers = ["name / creating op", "category", "module", "created in", "shape", "dtype", "size", "share",
               "past last use"]
    return (f"<section><h2>Largest tensors alive at the steady-state peak</h2>"
            f"{_table(headers, rows, {6, 7})}</section>")


def _modules(r: Result, depth: int) -> str:
    modules = at_depth(r.modules, depth)
    if not modules:
        return ""
    shown = [m for m in modules if m.parameters or m.saved_activation_bytes or m.peak_bytes or m.parameter_bytes]
    peak = r.steady_state_peak.bytes
    rows = [[_dotted(_module(m.module)), f"{m.parameters:,}", f"{m.trainable_parameters:,}",
             human_bytes(m.parameter_bytes),
             human_bytes(m.saved_activation_bytes), human_bytes(m.peak_bytes), share(m.peak_bytes, peak)]
            for m in shown]
    tot = {k: sum(getattr(m, k) for m in modules) for k in
           ("parameters", "trainable_parameters", "parameter_bytes", "saved_activation_bytes", "peak_bytes")}
    total = ["total", f"{tot['parameters']:,}", f"{tot['trainable_parameters']:,}", human_bytes(tot["parameter_bytes"]),
             human_bytes(tot["saved_activation_bytes"]), human_bytes(tot["peak_bytes"]), share(tot["peak_bytes"], peak)]
    headers = ["module", "parameters", "trainable", "parameter bytes", "saved activations", "bytes at peak", "share"]
    hidden = len(modules) - len(shown)
    note = (f' <span class="muted">({hidden} module{"s" if hidden > 1 else ""} with nothing attributed '
            f'{"are" if hidden > 1 else "is"} not listed; the total includes every module.)</span>' if hidden else "")
    return ("<section><h2>Per module</h2><p>Saved activations: bytes saved for backward during the module's forward, "
            "one iteration. Bytes at peak: what is alive at the steady-state peak and attributed to the module."
            f"{note}</p>{_table(headers, rows, {1, 2, 3, 4, 5, 6}, total)}</section>")


def _device(r: Result) -> str:
    """cuda target: the three peaks, each labelled with the PyTorch counter it predicts, and the fit."""
    d = r.device
    if not d:
        return ""
    rows = [["allocated", human_bytes(r.steady_state_peak.bytes), _Html("<code>torch.cuda.max_memory_allocated()</code>")],
            ["reserved", human_bytes(d["steady_state_reserved"]),
             _Html(f"<code>torch.cuda.max_memory_reserved()</code> ({d['segments']} segments)")],
            ["device total", human_bytes(d["steady_state_device_total"]),
             f"nvidia-smi: reserved + {human_bytes(d['context_bytes'])} CUDA context (estimated)"]]
    if d["fits"]:
        verdict = f'<p class="fits">Fits: {_e(human_bytes(d["headroom_bytes"]))} headroom.</p>'
    else:
        oom = f" The caching allocator runs out at event {d['oom_event']:,}." if d["oom_event"] is not None else ""
        verdict = (f'<p class="nofit"><b>Does not fit:</b> needs {_e(human_bytes(d["steady_state_device_total"]))} '
                   f'of {_e(human_bytes(d["capacity_bytes"]))}.{_e(oom)}</p>')
    conf = f" with <code>PYTORCH_CUDA_ALLOC_CONF={_e(d['allocator_options'])}</code>" if d["allocator_options"] else ""
    return (f"<section><h2>On {_e(d['gpu_name'])} ({_e(human_bytes(d['capacity_bytes']))}){conf}</h2>"
            f"{_table(['steady-state peak', 'size', 'predicts'], rows, {1})}{verdict}</section>")


def _modalities(r: Result) -> str:
    s = sections.modalities(r)
    return "" if s is None else _section(s, s.rows[:-1], set(range(1, 8)), s.rows[-1])


def _phase_peaks(r: Result) -> str:
    s = sections.phase_peaks(r)
    return "" if s is None else _section(s, s.rows, set(range(1, len(s.headers) - 1)))


def _section(s: "sections.Section", rows: list, numeric: set[int], total: list | None = None) -> str:
    """A text-report section as HTML: title, its lines, its table."""
    lines = "".join(f"<p>{_e(line)}</p>" for line in s.lines)
    return f"<section><h2>{_e(s.title)}</h2>{lines}{_table(s.headers, rows, numeric, total)}</section>"


def _static(r: Result) -> str:
    static = r.static or {}
    if not static:
        return ""
    peak = r.steady_state_peak.bytes
    rows = [[k, human_bytes(v), f"{v:,}", share(v, peak)] for k, v in static.items()]
    n = sum(static.values())
    total = ["total", human_bytes(n), f"{n:,}", share(n, peak)]
    return ("<section><h2>Static memory</h2><p>Held for the whole steady state, whatever the batch: parameters, "
            "buffers, gradients and optimizer state. Share is of the steady-state peak.</p>"
            f"{_table(['kind', 'size', 'bytes', 'share of peak'], rows, {1, 2, 3}, total)}</section>")


def _ops(r: Result) -> str:
    ops = r.ops or {}
    unknown = ops.get("unknown") or {}
    line = (f"<p>{ops.get('count', 0):,} ATen ops recorded; trace "
            f"{r.trace_seconds:.2f} s, analysis {r.analysis_seconds:.2f} s.</p>")
    if not unknown:
        return f"<section><h2>Ops</h2>{line}</section>"
    items = "".join(f"<li><code>{_e(op)}</code> &times;{n:,}</li>"
                    for op, n in sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"<section><h2>Ops</h2>{line}<p><b>{len(unknown)} op kinds have no registry entry.</b> Their outputs "
            "were counted, but no kernel workspace was assumed for them.</p>"
            f'<ul class="ops">{items}</ul></section>')


def _notes(r: Result) -> str:
    notes = getattr(r, "notes", None) or []
    if not notes:
        return ""
    return "<section><h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul></section>"


def _versions(r: Result) -> str:
    versions = getattr(r, "versions", None) or {}
    parts = [f"{_e(k)} {_e(v)}" for k, v in versions.items()]
    parts.append(f"schema {_e(getattr(r, 'schema_version', '?'))}")
    return f"<footer>Generated by memgraph &middot; {' &middot; '.join(parts)}</footer>"


def render_html(result: Result, depth: int = 3) -> str:
    """The whole report as one self-contained HTML document."""
    r = result
    body = "".join([_header(r), _peaks(r), _device(r), _timeline(r), _breakdown(r.steady_state_peak),
                    _top_tensors(r.steady_state_peak), _phase_peaks(r), _modalities(r), _modules(r, depth), _static(r), _ops(r), _notes(r),
                    _versions(r)])
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>memgraph: {_e(r.model)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}</main></body></html>\n")
