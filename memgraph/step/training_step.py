"""One training iteration, exactly as a plain PyTorch loop writes it.

Both the tracer (on ``meta``) and ``memgraph measure`` (on a real device) run this function,
so the prediction and the measurement describe the same program. Two loops are written:

``plain`` (default): ``out = model(**batch); out.loss.backward(); opt.step(); opt.zero_grad()``.
    Python frees ``outputs`` and ``loss`` when the function returns, so the model outputs
    (logits included, and a KV cache if the model builds one) stay alive through backward and
    the optimizer step.
``trainer``: as Hugging Face's ``Trainer.training_step``: ``compute_loss`` returns only the loss,
    so the outputs are dropped before backward and what autograd did not save is freed then.

After the step the gradients are cleared as ``zero_grad`` says (``--zero-grad``):

``set-to-none`` (default): ``optimizer.zero_grad(set_to_none=True)``, PyTorch >= 2.0's default
    (torch/optim/optimizer.py ``Optimizer.zero_grad``): the ``.grad`` tensors are dropped, so the
    next backward allocates them again.
``zero``: ``optimizer.zero_grad(set_to_none=False)`` (the default before PyTorch 2.0): ``.grad`` is
    zeroed in place and stays allocated through the next forward; the next backward accumulates
    into it (torch/csrc/autograd/functions/accumulate_grad.h ``accumulateGrad``: ``variable_grad += new_grad``).
``none``: never cleared (benchmark scripts without ``zero_grad``): the same memory as ``zero``, from
    the first backward on.

With no optimizer (``--optimizer none``) there is no step, and ``model.zero_grad`` clears the gradients.

Mixed precision is written the way the PyTorch AMP recipe writes it: forward and loss inside the
``autocast`` context, backward outside it; with a GradScaler (fp16), ``scaler.scale(loss).backward()``,
``scaler.step(optimizer)``, ``scaler.update()``. A real GPU run passes ``torch.autocast("cuda", ...)``
and ``torch.amp.GradScaler("cuda")``; the meta trace passes the emulations of both
(:mod:`memgraph.trace.emulate.autocast_emulation`, :mod:`memgraph.step.grad_scaler`), so the two run the same program.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

PHASES = ("forward", "backward", "optimizer", "zero_grad")


def train_iteration(
    model: torch.nn.Module,
    batch: tuple[tuple, dict],
    compute_loss: Callable[[object], torch.Tensor],
    optimizer: torch.optim.Optimizer | None,
    set_phase: Callable[[str], None] = lambda phase: None,
    autocast=None,
    scaler=None,
    loop: str = "plain",
    zero_grad: str = "set-to-none",
    micro_steps: int = 1,
    saved_tensors=None,
) -> None:
    """forward, loss, backward (``micro_steps`` times: gradient accumulation, memgraph/step/grad_accumulation.py),
    optimizer step (if ``optimizer``), then clear the gradients.

    ``autocast``: a zero-argument factory of the context forward and loss run in (``None``: none).
    ``saved_tensors``: a zero-argument factory of a saved-tensor hooks context forward and loss run in, inside
    ``autocast`` (``--activation-offload``: ``save_on_cpu``, memgraph/step/activation_offload.py).
    ``scaler``: a ``torch.amp.GradScaler``-like object (``None``: plain backward and step).
    ``loop``: ``"plain"`` keeps the outputs to the end of the iteration (with accumulation: until the next
    micro-step's forward rebinds them), ``"trainer"`` drops them once the loss is taken (see the module docstring).
    ``zero_grad``: ``"set-to-none"``, ``"zero"`` or ``"none"`` (see the module docstring).
    With ``micro_steps`` > 1 each loss is divided by ``micro_steps`` before backward, as the Trainer does.
    """
    args, kwargs = batch
    outputs = loss = None
    for _ in range(micro_steps):
        set_phase("forward")
        with _entered(autocast), _entered(saved_tensors):
            outputs = model(*args, **kwargs)
            loss = compute_loss(outputs) if micro_steps == 1 else compute_loss(outputs) / micro_steps
        if loop == "trainer":
            outputs = None
        set_phase("backward")
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
    if optimizer is not None:
        set_phase("optimizer")
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
    if zero_grad != "none":
        set_phase("zero_grad")
        owner = model if optimizer is None else optimizer
        owner.zero_grad(set_to_none=zero_grad == "set-to-none")


def _entered(factory):
    return contextlib.nullcontext() if factory is None else factory()
