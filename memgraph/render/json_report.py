"""JSON renderer: the Result as documented in the README's schema section."""

from __future__ import annotations

import json
from dataclasses import asdict

from memgraph.analysis.group_by import at_depth, fold_repeated
from memgraph.analysis.result import Result


def render_json(r: Result, depth: int = 3) -> str:
    """The Result as JSON, its per-module rows summed to ``depth`` as in every other format, and the same rows
    with identical layers folded (``modules_folded``: one layer's figures, ``count``, ``first`` and ``last``)."""
    d = r.to_dict()
    rows = at_depth(r.modules, depth)
    d["modules"] = [asdict(m) for m in rows]
    d["modules_folded"] = [{**asdict(run.row), "count": run.count, "first": run.first, "last": run.last}
                           for run in fold_repeated(rows)]
    d["module_depth"] = depth
    if not d["ranks"]:  # only --strategy runs have per-rank figures
        del d["ranks"]
    return json.dumps(d, indent=2) + "\n"
