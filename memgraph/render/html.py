"""Self-contained HTML report of a :class:`~memgraph.analysis.result.Result`.

One file, inline CSS, a few lines of inline JavaScript for the timeline's hover, and no external
resources. Its text and tables are the sections of the text report (``sections.build(result,
depth)``), each laid out by one function, :func:`render_section`. Around them sit views only HTML
can draw, each read from the Result and adding no sentence or table of its own: the option chips,
the two peak cards, the timeline stacked by category (:mod:`memgraph.render.html_timeline`), the
category stack bar and the per-module icicle (:mod:`memgraph.render.html_modules`).
Every string is escaped (model names, module paths and op names are user input).
"""

from __future__ import annotations

from html import escape

from memgraph.analysis.result import Peak, Result
from memgraph.render import sections
from memgraph.render.html_modules import icicle, icicle_section_text
from memgraph.render.html_timeline import CATEGORY_COLORS, OTHER_COLOR, timeline_figure
from memgraph.render.sections import Section
from memgraph.units import human_bytes, share

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
th, td { padding: 4px 7px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; vertical-align: bottom; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th.num { text-align: right; }
.scroll { overflow-x: auto; }
tr.total td { font-weight: 650; border-top: 2px solid var(--ink); border-bottom: none; }
.stack { display: flex; height: 18px; border-radius: 4px; overflow: hidden; margin: 8px 0 4px; }
.stack span { display: block; height: 18px; }
.legend { font-size: 13px; color: var(--ink); margin: 6px 0 0; }
.legend span { margin-right: 16px; white-space: nowrap; display: inline-block; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
.legend .dash, .legend .dots { display: inline-block; width: 22px; margin-right: 5px; vertical-align: 3px;
  border-top: 2px dashed; }
.legend .dots { border-top-style: dotted; }
figure { margin: 0; }
figure.chart { position: relative; }
svg.timeline, svg.icicle { width: 100%; height: auto; display: block; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
.tip { display: none; position: absolute; pointer-events: none; background: #fff; border: 1px solid var(--line);
  border-radius: 6px; box-shadow: 0 2px 8px rgba(31, 41, 51, .18); padding: 6px 9px; font-size: 12.5px;
  white-space: nowrap; z-index: 2; }
.tip b { display: block; margin-bottom: 2px; }
p.fit { font-weight: 600; padding: 6px 10px; border-radius: 6px; }
p.fit.yes { background: #edf7ee; color: #1e6b34; }
p.fit.no { background: #fdecec; color: #9b1c1c; }
footer { color: var(--muted); font-size: 12.5px; text-align: center; }
@media (max-width: 1100px) { table { font-size: 12px; } th, td { padding: 3px 5px; } main { padding: 16px 10px; } }
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


# ---------------------------------------------------------------- timeline and per-module view


def _timeline(r: Result) -> str:
    if not r.timeline:
        return '<section id="timeline-section"><h2>Memory timeline</h2><p class="muted">No timeline recorded.</p></section>'
    fit = "".join(f'<p class="fit {"yes" if r.device.fits else "no"}">{_e(line)}</p>'
                  for line in sections.fit_lines(r.device)) if r.device else ""
    return f'<section id="timeline-section"><h2>Memory timeline</h2>{fit}{timeline_figure(r)}</section>'


def _modules_view(r: Result) -> str:
    """The icicle in a section of its own, beside the timeline: where the peak's bytes live."""
    svg = icicle(r)
    if not svg:
        return ""
    return (f'<section id="module-icicle"><h2>At the steady-state peak, by module</h2>'
            f'<p class="muted">{icicle_section_text(r)}</p>{svg}</section>')


# ---------------------------------------------------------------- the page


def _versions(r: Result) -> str:
    parts = [f"{_e(k)} {_e(v)}" for k, v in (r.versions or {}).items()]
    parts.append(f"schema {_e(r.schema_version)}")
    return f"<footer>Generated by memgraph &middot; {' &middot; '.join(parts)}</footer>"


def render_html(result: Result, depth: int = 3) -> str:
    """The whole report as one self-contained HTML document.

    The sections of the text report in their order, each with its HTML-only view (option chips
    under the summary, the stack bar in the breakdown); the peak cards, the timeline and the
    per-module icicle follow the summary.
    """
    r = result
    views = {"summary": _options_chips(r.options or {}), "breakdown": _stack(r.steady_state_peak)}
    parts = []
    for i, s in enumerate(sections.build(r, depth)):
        parts.append(render_section(s, "h1" if i == 0 else "h2", views.get(s.key, "")))
        if i == 0:
            parts += [_peaks(r), _timeline(r), _modules_view(r)]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>memgraph: {_e(r.model)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}{_versions(r)}</main></body></html>\n")
