"""One training iteration, exactly as a plain PyTorch loop writes it.

Both the tracer (on ``meta``) and ``memgraph measure`` (on a real device) run this function,
so the prediction and the measurement describe the same program. Python frees ``outputs``
and ``loss`` when the function returns, so the model outputs (logits included) stay alive
through backward and the optimizer step, as in ``out = model(**batch); out.loss.backward()``.

Mixed precision is written the way the PyTorch AMP recipe writes it: forward and loss inside the
``autocast`` context, backward outside it; with a GradScaler (fp16), ``scaler.scale(loss).backward()``,
``scaler.step(optimizer)``, ``scaler.update()``. A real GPU run passes ``torch.autocast("cuda", ...)``
and ``torch.amp.GradScaler("cuda")``; the meta trace passes the emulations of both
(:mod:`memgraph.precision.emulate`, :mod:`memgraph.precision.scaler`), so the two run the same program.
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
    scaler=None,
) -> None:
    """forward, loss, backward, optimizer step, zero_grad(set_to_none=True).

    ``autocast``: a zero-argument factory of the context forward and loss run in (``None``: none).
    ``scaler``: a ``torch.amp.GradScaler``-like object (``None``: plain backward and step).
    """
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
    if scaler is None:
        loss.backward()
    else:
        scaler.scale(loss).backward()
    set_phase("optimizer")
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()
    set_phase("zero_grad")
    optimizer.zero_grad(set_to_none=True)
