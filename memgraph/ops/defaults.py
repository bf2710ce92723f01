"""The default registry entries (reviewed ops, their families and kernel workspaces)."""

from __future__ import annotations

from .registry import register

# Filled in by family below.
