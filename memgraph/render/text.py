"""Terminal table and markdown renderers (same sections, different table formats).

Names in a report (models, modules, ops, tensors) are user input. In the terminal table, control
characters are shown (``\x1b``), never sent, so a module name cannot drive the terminal; in markdown,
``|`` cannot split a table cell and ``<`` cannot open an HTML tag.
"""

from __future__ import annotations

import re

from tabulate import tabulate

from memgraph.analysis.result import Result
from memgraph.render.sections import build


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text) -> str:
    """``text`` with every control character written out (ESC -> ``\\x1b``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def render_table(r: Result, depth: int = 3) -> str:
    out = []
    for s in build(r, depth):
        out.append(f"== {visible(s.title)} ==")
        out.extend(visible(line) for line in s.lines)
        if s.rows:
            rows = [[visible(c) for c in row] for row in s.rows]
            out.append(tabulate(rows, s.headers, tablefmt="simple", disable_numparse=True))
        out.append("")
    return "\n".join(out)


def _md_escape(cell) -> str:
    return visible(cell).replace("|", "\\|").replace("<", "&lt;")


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
