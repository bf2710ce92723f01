"""The transformers class an auto mapping names for a config's model type (never downloaded, never built)."""

from __future__ import annotations


def auto_class(cfg, mapping_names: dict):
    """The class ``mapping_names`` (one of transformers' ``*_MAPPING_NAMES`` dicts in ``models/auto``) names for
    ``cfg.model_type`` (the first where it names several), or None when it names none or transformers lacks it."""
    import transformers

    name = mapping_names.get(getattr(cfg, "model_type", None))
    if isinstance(name, (list, tuple)):
        name = name[0] if name else None
    return getattr(transformers, name, None) if isinstance(name, str) else None


__all__ = ["auto_class"]
