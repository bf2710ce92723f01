"""Pick a renderer by format name."""

from __future__ import annotations

from memgraph.analysis.result import Result
from memgraph.errors import MemgraphError

FORMATS = ("table", "md", "json", "html", "snapshot")
# The format a file's extension asks for (``-o report.html`` writes html without ``--format``).
EXTENSION_FORMATS = {".txt": "table", ".md": "md", ".markdown": "md", ".json": "json", ".html": "html",
                     ".htm": "html", ".pickle": "snapshot", ".pkl": "snapshot"}


def render(r: Result, fmt: str, depth: int = 3) -> str:
    if fmt == "table":
        from memgraph.render.text import render_table

        return render_table(r, depth)
    if fmt == "md":
        from memgraph.render.text import render_markdown

        return render_markdown(r, depth)
    if fmt == "json":
        from memgraph.render.json_report import render_json

        return render_json(r, depth)
    if fmt == "html":
        from memgraph.render.html import render_html

        return render_html(r, depth)
    if fmt == "snapshot":
        raise MemgraphError("the snapshot format is made from the trace, not from a report: "
                            "use memgraph.api.predicted_snapshot")
    raise MemgraphError(f"unknown format {fmt!r}: pass --format one of {', '.join(FORMATS)}")
