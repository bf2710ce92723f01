"""JSON renderer: the Result as documented in the README's schema section."""

from __future__ import annotations

import json
from dataclasses import asdict

from memgraph.analysis.group_by import at_depth
from memgraph.analysis.result import Result


def render_json(r: Result, depth: int = 3) -> str:
    """The Result as JSON, its per-module rows summed to ``depth`` as in every other format."""
    d = r.to_dict()
    d["modules"] = [asdict(m) for m in at_depth(r.modules, depth)]
    d["module_depth"] = depth
    return json.dumps(d, indent=2) + "\n"
