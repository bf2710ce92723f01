"""Which parameters train: ``--train`` patterns select, ``--freeze`` patterns then remove."""

from __future__ import annotations

from fnmatch import fnmatchcase

import torch

from memgraph.errors import MemgraphError


def apply_trainable(model: torch.nn.Module, train: tuple[str, ...], freeze: tuple[str, ...]) -> None:
    """Set ``requires_grad`` from shell-style patterns over parameter names (``model.layers.*``)."""
    names = [n for n, _ in model.named_parameters()]
    for pattern in (*train, *freeze):
        if not any(fnmatchcase(n, pattern) for n in names):
            example = names[0] if names else "(no parameters)"
            raise MemgraphError(
                f"pattern {pattern!r} matches no parameter: patterns match names such as {example!r}"
            )
    for name, p in model.named_parameters():
        trains = p.requires_grad and (not train or any(fnmatchcase(name, t) for t in train))
        if any(fnmatchcase(name, f) for f in freeze):
            trains = False
        p.requires_grad_(trains)
