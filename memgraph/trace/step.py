"""One training iteration, exactly as a plain PyTorch loop writes it.

Both the tracer (on ``meta``) and ``memgraph measure`` (on a real device) run this function,
so the prediction and the measurement describe the same program. Python frees ``outputs``
and ``loss`` when the function returns, so the model outputs (logits included) stay alive
through backward and the optimizer step, as in ``out = model(**batch); out.loss.backward()``.
"""

from __future__ import annotations

from typing import Callable

import torch

PHASES = ("forward", "backward", "optimizer", "zero_grad")


def train_iteration(
    model: torch.nn.Module,
    batch: tuple[tuple, dict],
    compute_loss: Callable[[object], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    set_phase: Callable[[str], None] = lambda phase: None,
    autocast=None,
) -> None:
    """forward, loss, backward, optimizer step, zero_grad(set_to_none=True)."""
    args, kwargs = batch
    set_phase("forward")
    if autocast is None:
        outputs = model(*args, **kwargs)
        loss = compute_loss(outputs)
    else:
        with autocast():
            outputs = model(*args, **kwargs)
            loss = compute_loss(outputs)
    set_phase("backward")
    loss.backward()
    set_phase("optimizer")
    optimizer.step()
    set_phase("zero_grad")
    optimizer.zero_grad(set_to_none=True)
