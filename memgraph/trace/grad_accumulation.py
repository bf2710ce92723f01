"""Gradient accumulation (``--grad-accum N``): N micro-steps of forward and backward, one optimizer step.

The loop is the one Hugging Face's Trainer and the PyTorch recipes write
(transformers/trainer.py ``training_step``: ``loss = loss / self.args.gradient_accumulation_steps`` before
``backward``; the optimizer steps once every N micro-batches)::

    for micro in range(N):
        outputs = model(**batch)
        loss = compute_loss(outputs) / N
        loss.backward()            # micro-steps 2..N: AccumulateGrad adds into the existing .grad
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

Each micro-batch is the same ``--batch-size`` batch. With ``--loop plain`` the Python variables ``outputs``
and ``loss`` keep the previous micro-step's outputs alive until the next forward returns and rebinds them,
as in any such loop; ``--loop trainer`` drops them once the loss is taken (see training_step.py).
Mixed precision and the GradScaler are used as in ``train_iteration``: ``scaler.scale(loss).backward()``
per micro-step, one ``scaler.step``/``update``.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch

from memgraph.model_spec.options import TrainingOptions
from memgraph.trace.training_step import train_iteration


def accumulated_iteration(
    model: torch.nn.Module,
    batch: tuple[tuple, dict],
    compute_loss: Callable[[object], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    set_phase: Callable[[str], None] = lambda phase: None,
    autocast=None,
    scaler=None,
    loop: str = "plain",
    micro_steps: int = 1,
) -> None:
    """``micro_steps`` forward/backward passes (loss divided by ``micro_steps``), then one step and zero_grad."""
    args, kwargs = batch
    outputs = loss = None
    for _ in range(micro_steps):
        set_phase("forward")
        if autocast is None:
            outputs = model(*args, **kwargs)
            loss = compute_loss(outputs) / micro_steps
        else:
            with autocast():
                outputs = model(*args, **kwargs)
                loss = compute_loss(outputs) / micro_steps
        if loop == "trainer":
            outputs = None
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


def iteration_function(opts: TrainingOptions):
    """``train_iteration`` (training_step.py), or :func:`accumulated_iteration` with ``--grad-accum N > 1``."""
    if opts.grad_accum == 1:
        return train_iteration
    return partial(accumulated_iteration, micro_steps=opts.grad_accum)
