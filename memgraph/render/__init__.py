"""Report: render a :class:`~memgraph.analysis.result.Result` (they only read it)."""
