"""One training iteration, exactly as a plain PyTorch loop writes it.

Both the tracer (on ``meta``) and ``memgraph measure`` (on a real device) run this function,
so the prediction and the measurement describe the same program. Two loops are written:

``plain`` (default): ``out = model(**batch); out.loss.backward(); opt.step(); opt.zero_grad()``.
    Python frees ``outputs`` and ``loss`` when the function returns, so the model outputs
    (logits included, and a KV cache if the model builds one) stay alive through backward and
    the optimizer step.
``trainer``: as Hugging Face's ``Trainer.training_step``: ``compute_loss`` returns only the loss,
    so the outputs are dropped before backward and what autograd did not save is freed then.

Mixed precision is written the way the PyTorch AMP recipe writes it: forward and loss inside the
``autocast`` context, backward outside it; with a GradScaler (fp16), ``scaler.scale(loss).backward()``,
``scaler.step(optimizer)``, ``scaler.update()``. A real GPU run passes ``torch.autocast("cuda", ...)``
and ``torch.amp.GradScaler("cuda")``; the meta trace passes the emulations of both
(:mod:`memgraph.trace.autocast_emulation`, :mod:`memgraph.trace.grad_scaler`), so the two run the same program.
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
    loop: str = "plain",
) -> None:
    """forward, loss, backward, optimizer step, zero_grad(set_to_none=True).

    ``autocast``: a zero-argument factory of the context forward and loss run in (``None``: none).
    ``scaler``: a ``torch.amp.GradScaler``-like object (``None``: plain backward and step).
    ``loop``: ``"plain"`` keeps the outputs to the end of the iteration, ``"trainer"`` drops them
    once the loss is taken (see the module docstring).
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
    if loop == "trainer":
        del outputs
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
