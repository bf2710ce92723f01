"""Annotate: give every storage a memory category."""
