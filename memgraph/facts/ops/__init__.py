"""Per-op facts in one registry."""
