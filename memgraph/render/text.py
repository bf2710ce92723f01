"""Terminal table and markdown renderers (same sections, different table formats)."""

from __future__ import annotations

from tabulate import tabulate

from memgraph.analysis.result import Result
from memgraph.render.sections import build


def render_table(r: Result, depth: int = 3) -> str:
    out = []
    for s in build(r, depth):
        out.append(f"== {s.title} ==")
        out.extend(s.lines)
        if s.rows:
            out.append(tabulate(s.rows, s.headers, tablefmt="simple", disable_numparse=True))
        out.append("")
    return "\n".join(out)


def _md_escape(cell) -> str:
    return str(cell).replace("|", "\\|")


def render_markdown(r: Result, depth: int = 3) -> str:
    out = []
    for i, s in enumerate(build(r, depth)):
        out.append(f"{'#' if i == 0 else '##'} {s.title}\n")
        out.extend(f"{_md_escape(line)}  " if line else "" for line in s.lines)
        if s.lines:
            out.append("")
        if s.rows:
            rows = [[_md_escape(c) for c in row] for row in s.rows]
            out.append(tabulate(rows, s.headers, tablefmt="github", disable_numparse=True))
            out.append("")
    return "\n".join(out)
