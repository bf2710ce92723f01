"""Shadows of some slices of a tensor: a ``cat`` of known and unknown parts, read back part by part.

GLM-5 Next's sparse-attention indexer packs its keys, its gate scores and the attention mask (as a float channel)
into one tensor and reads the mask back from it (modeling_glm5_next.py ``Glm5NextIndexer``, transformers 5.23)::

    packed_states = torch.cat([k, gate_scores, valid_channel], dim=-1)
    valid_keys = packed_states[..., -1].bool()
    keys, gate_scores, valid_keys = torch.split(packed_states, [head_dim, head_dim, 1], dim=-1)

The keys have no values on meta, so the packed tensor gets no shadow (trace/shadow_values.py shadows a result only
when every input has one); the mask channel's values are the attention mask's. :class:`SliceShadows` remembers, for
such a ``cat``, which ranges along the cat dimension hold a shadowed part, and gives a shadow to a ``select``,
``slice`` or ``split`` of the packed tensor that lies within one of them: the same op on that part's shadow.
"""

from __future__ import annotations

import torch

from memgraph.private_api import WeakIdKeyDictionary

aten = torch.ops.aten


class SliceShadows:
    """Known parts of meta tensors along one dimension: tensor -> (dim, [(start, stop, shadow of the part)])."""

    def __init__(self):
        self._parts = WeakIdKeyDictionary()

    def __bool__(self) -> bool:
        return len(self._parts) > 0

    def record_cat(self, tensors, dim: int, out: torch.Tensor, value_of) -> None:
        """``out = cat(tensors, dim)`` where some of ``tensors`` have shadows (``value_of(t)``, None if not)."""
        dim = dim % out.dim()
        whole = [t for t in tensors if t.dim() == out.dim()]
        if len(whole) == 1 and whole[0] in self._parts:
            # a cache's first update: ``cat([empty [0], packed])`` is the packed tensor again (transformers
            # DynamicCache ``update_indexer`` in training, where ``use_cache`` keeps a cache)
            self._parts[out] = self._parts[whole[0]]
            return
        parts, start = [], 0
        for t in tensors:
            width = t.shape[dim] if t.dim() == out.dim() else 0  # a legacy empty [0] part adds nothing
            v = value_of(t)
            if v is not None and width:
                parts.append((start, start + width, v))
            start += width
        if parts and start == out.shape[dim]:
            self._parts[out] = (dim, parts)

    def derive(self, func, args, kwargs, out) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(meta output, its shadow) for a ``select`` / ``slice`` / ``split`` of a tensor with known parts that
        falls within one part; empty where none does."""
        x = args[0] if args else None
        entry = self._parts.get(x) if isinstance(x, torch.Tensor) else None
        if entry is None:
            return []
        dim, parts = entry
        packet = func.overloadpacket
        op_dim = _arg(func, args, kwargs, "dim", 0) % x.dim()
        if op_dim != dim:
            return []
        size = x.shape[dim]
        if packet is aten.select:
            i = _arg(func, args, kwargs, "index", None) % size
            return _within(parts, i, i + 1, lambda v, lo: v.select(dim, i - lo), [out])
        if packet is aten.slice:
            start, stop = _arg(func, args, kwargs, "start", None), _arg(func, args, kwargs, "end", None)
            step = _arg(func, args, kwargs, "step", 1)
            start, stop, _ = slice(start, stop).indices(size)
            if step != 1:
                return []
            return _within(parts, start, stop, lambda v, lo: v.narrow(dim, start - lo, stop - start), [out])
        if packet in (aten.split_with_sizes, aten.split):
            pairs, start = [], 0
            for piece in out:
                stop = start + piece.shape[dim]
                lo_hi = start
                pairs += _within(parts, start, stop,
                                 lambda v, lo, s=lo_hi, n=stop - start: v.narrow(dim, s - lo, n), [piece])
                start = stop
            return pairs
        return []


def _within(parts, start: int, stop: int, take, outs) -> list:
    """The shadow of ``[start, stop)`` where one known part holds it all."""
    for lo, hi, v in parts:
        if lo <= start and stop <= hi and stop > start:
            return [(outs[0], take(v, lo))]
    return []


def _arg(func, args, kwargs, name: str, default):
    from memgraph.private_api import op_schema

    for i, a in enumerate(op_schema(func).arguments):
        if a.name == name:
            if i < len(args):
                return args[i]
            return kwargs.get(name, default if a.default_value is None else a.default_value)
    return default


__all__ = ["SliceShadows"]
