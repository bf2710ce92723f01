"""JSON renderer: the Result as documented in the README's schema section."""

from __future__ import annotations

import json

from ..analysis.result import Result


def render_json(r: Result, depth: int = 3) -> str:
    return json.dumps(r.to_dict(), indent=2) + "\n"
