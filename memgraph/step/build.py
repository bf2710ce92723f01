"""The training step, built once: the model for a spec, its batch, its loss and its optimizer on a device,
wrapped by a distributed run if there is one; and one iteration of it.

The meta trace (trace/tracer.py), the real run (measure/real_step.py) and each rank's layout (trace/parallel/ranks.py)
all get their step from :func:`memgraph.step.build_step`, so what is predicted and what is measured is one program. What
differs between them is passed in, never decided here: the trace's emulations (``constructor_values``,
``checkpoint_context_fn``) and, at run time, the autocast context, GradScaler and saved-tensor hooks of
:meth:`Step.iteration`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch

from memgraph.model_spec.build import build_model
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.inputs import Batch
from memgraph.model_spec.losses import loss_and_model_batch
from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.step.fused_optimizers import fused_on_meta
from memgraph.step.grad_accumulation import iteration_function
from memgraph.step.optimizer_in_backward import make_step_optimizer


@dataclass
class Step:
    """One training step, ready to run: what :meth:`iteration` calls, and what recording and measuring read."""

    model: torch.nn.Module  # the model as built (its parameters, buffers and modules)
    runner: torch.nn.Module  # what the loop calls: the model, or DDP around it, or it sharded by FSDP2
    batch_spec: Batch
    batch: tuple[tuple, dict]  # the inputs as made (a cross-entropy target included)
    model_batch: tuple[tuple, dict]  # what the model is called with (a target is held by compute_loss)
    compute_loss: Callable[[object], torch.Tensor]
    optimizer: object  # a torch optimizer, OptimizerInBackward, a distributed run's partition of one, or None
    trainable: list[torch.nn.Parameter]
    optimizer_impl: str  # foreach, for-loop, fused, or none
    options: TrainingOptions  # resolved: no ``auto`` left
    assumptions: list[str]  # the defaults resolved, one phrase each (model_spec/defaults.py)

    def iteration(self, set_phase: Callable[[str], None] = lambda phase: None, autocast=None, scaler=None,
                  saved_tensors=None, compute_loss: Callable[[object], torch.Tensor] | None = None) -> None:
        """One training iteration with the resolved loop options (step/training_step.py ``train_iteration``,
        ``--grad-accum`` micro-steps included). ``autocast``, ``scaler`` and ``saved_tensors`` are the real
        objects on a real device and their emulations on meta; ``compute_loss`` replaces the step's (a trace
        wraps it to watch the outputs)."""
        o = self.options
        iteration_function(o)(self.runner, self.model_batch, compute_loss or self.compute_loss, self.optimizer,
                              set_phase, autocast=autocast, loop=o.loop, scaler=scaler, zero_grad=o.zero_grad,
                              saved_tensors=saved_tensors)


def build_model_step(spec: ModelSpec, opts: TrainingOptions, device: str, distributed=None, *,
                     seed: int | None = None, constructor_values=None, checkpoint_context_fn=None) -> Step:
    """The training step of ``spec`` with ``opts`` on ``device``: memgraph's own loop around the model it builds
    (the ``model`` kind of step/kinds.py).

    ``distributed``: a :class:`~memgraph.trace.parallel.distributed.DistributedRun` set up for one rank (a fake process
    group on meta, a real one in measure/distributed.py): it wraps the model and partitions the optimizer.
    ``seed``: a real run's seed (``torch.manual_seed`` before the model is built, and the generator the
    random inputs are drawn from); None on meta, which draws nothing.
    ``constructor_values`` and ``checkpoint_context_fn``: a meta trace's emulations, handed to
    :func:`~memgraph.model_spec.build.build_model`."""
    resolved = resolve_defaults(spec, opts)
    opts = resolved.options
    meta = torch.device(device).type == "meta"
    if seed is not None:
        torch.manual_seed(seed)
    model = build_model(spec, opts, device, checkpoint_context_fn, constructor_values=constructor_values)
    runner = model if distributed is None else distributed.wrap(model)
    batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
    batch = batch_spec.make(device, None if seed is None else torch.Generator().manual_seed(seed))
    compute_loss, model_batch = loss_and_model_batch(spec, opts, batch_spec, batch, model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    with fused_on_meta() if meta else contextlib.nullcontext():  # fused optimizers admit meta parameters
        optimizer = make_step_optimizer(opts, trainable, resolved.optimizer_impl)
        if distributed is not None:
            optimizer = distributed.shard_optimizer(optimizer)  # zero1: partitioned
    return Step(model=model, runner=runner, batch_spec=batch_spec, batch=batch, model_batch=model_batch,
                compute_loss=compute_loss, optimizer=optimizer, trainable=trainable,
                optimizer_impl=resolved.optimizer_impl, options=opts, assumptions=resolved.assumptions)


__all__ = ["Step", "build_model_step"]
