"""Optimizers by name, with the kernel implementation PyTorch would pick on the target.

PyTorch's default (torch/optim/optimizer.py ``_default_to_fused_or_foreach``) is the foreach
implementation when every parameter is a CUDA tensor and the per-parameter for-loop
otherwise. On ``meta`` it would pick the for-loop, so the target decides explicitly.
"""

from __future__ import annotations

import torch

from memgraph.errors import MemgraphError

LEARNING_RATE = 1e-4  # irrelevant to memory; any positive value
SGD_MOMENTUM = 0.9
DEFAULT_IMPL = {"cuda": "foreach", "cpu": "for-loop"}


def resolve_impl(impl: str, target: str) -> str:
    return DEFAULT_IMPL[target] if impl == "auto" else impl


# Per-parameter state tensors of the size of the parameter that each optimizer keeps (torch 2.13,
# torch/optim/adam.py _init_group: exp_avg and exp_avg_sq; sgd.py: momentum_buffer when momentum != 0).
STATE_TENSORS_PER_PARAMETER = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2, "none": 0}


def make_optimizer(name: str, params: list[torch.nn.Parameter], impl: str) -> torch.optim.Optimizer | None:
    """Build optimizer ``name`` ('sgd', 'sgd-momentum', 'adam', 'adamw') with implementation ``impl``;
    ``None`` for 'none' (forward and backward only)."""
    if not params:
        raise MemgraphError("no parameter trains: loosen --freeze / --train so that at least one matches")
    if name == "none":
        return None
    flags = {"foreach": {"foreach": True}, "for-loop": {"foreach": False}, "fused": {"fused": True}}[impl]
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATE, **flags)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=SGD_MOMENTUM, **flags)
    if name == "adam":
        return torch.optim.Adam(params, lr=LEARNING_RATE, **flags)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=LEARNING_RATE, **flags)
    raise MemgraphError(f"unknown optimizer {name!r}: use sgd, sgd-momentum, adam or adamw")
