"""Dynamo's graph-break reasons as one readable line each, for the report's notes.

torch 2.13 keys ``torch._dynamo.utils.counters["graph_break"]`` by the whole multi-line message
(torch/_dynamo/exc.py ``format_graph_break_message``): a summary line, then ``Explanation:``, ``Hint:`` and
``Developer debug context:`` lines and the graph-break site's URL. The note keeps the summary, the first hint,
the debug context (shortened) and the URL.
"""

from __future__ import annotations

import re

CONTEXT_CHARS = 160  # the debug context names the call and its arguments; a long constant is cut here
_URL = re.compile(r"https?://\S+")


def one_line(reason: str) -> str:
    """``reason`` (Dynamo's message) as one line: ``summary; hint: ...; context: ...; URL``."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    if not lines:
        return reason.strip()
    parts = [lines[0]]
    hint = _field(lines, "Hint:")
    if hint:
        parts.append(f"hint: {hint.rstrip('.')}")
    context = _field(lines, "Developer debug context:")
    if context:
        parts.append("context: " + (context if len(context) <= CONTEXT_CHARS else context[:CONTEXT_CHARS] + "..."))
    url = next((m.group(0) for line in lines[1:] for m in [_URL.search(line)] if m), None)
    if url:
        parts.append(url)
    return "; ".join(parts)


def _field(lines: list[str], label: str) -> str | None:
    for line in lines[1:]:
        if line.startswith(label):
            return line[len(label):].strip() or None
    return None
