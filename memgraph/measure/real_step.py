"""Build the real model, batch, loss and optimizer exactly as the tracer does, on a real device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from memgraph.compiled import compile_for_real
from memgraph.model_spec.build import build_model
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.losses import loss_and_model_batch
from memgraph.model_spec.options import AUTOCAST_DTYPE, PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.trace.activation_offload import real_offload_context
from memgraph.trace.grad_scaler import make_scaler
from memgraph.trace.grad_accumulation import iteration_function
from memgraph.trace.layerdrop import every_layer_runs
from memgraph.trace.optimizer_in_backward import make_step_optimizer

SEED = 0


@dataclass
class RealRun:
    """What ``train_iteration`` runs on a real device; ``options`` are the resolved ones (no ``auto``)."""

    model: torch.nn.Module
    batch: tuple[tuple, dict]  # what the model is called with (a cross-entropy target is held by compute_loss)
    compute_loss: Callable[[object], torch.Tensor]
    optimizer: torch.optim.Optimizer | None
    optimizer_impl: str
    options: TrainingOptions


def build_run(spec: ModelSpec, opts: TrainingOptions, device: str, distributed=None) -> RealRun:
    """The model, batch, loss and optimizer with random weights and inputs on ``device``.

    ``distributed``: a :class:`~memgraph.trace.distributed.DistributedRun` in an initialised process group
    (measure/distributed.py): it wraps the model and partitions the optimizer as the trace does."""
    resolved = resolve_defaults(spec, opts)
    opts = resolved.options
    torch.manual_seed(SEED)
    model = build_model(spec, opts, device)
    runner = model if distributed is None else distributed.wrap(model)
    if opts.compile:  # --compile: torch.compile(model, mode=...) as a user writes it (memgraph/compiled/step.py)
        runner = compile_for_real(runner, opts)
    batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
    gen = torch.Generator().manual_seed(SEED)
    batch = batch_spec.make(device, gen)
    compute_loss, model_batch = loss_and_model_batch(spec, opts, batch_spec, batch, model)
    impl = resolved.optimizer_impl
    optimizer = make_step_optimizer(opts, [p for p in model.parameters() if p.requires_grad], impl)
    if distributed is not None:
        optimizer = distributed.shard_optimizer(optimizer)
    return RealRun(runner, model_batch, compute_loss, optimizer, impl, opts)


def run_iteration(run: RealRun, autocast=None, scaler=None) -> None:
    """One ``train_iteration`` of ``run`` with its resolved loop options, every layer run (LayerDrop off, as in
    the trace: trace/layerdrop.py)."""
    o = run.options
    with every_layer_runs(run.model):
        _iteration(run, o, autocast, scaler)


def _iteration(run: RealRun, o: TrainingOptions, autocast, scaler) -> None:
    iteration_function(o)(run.model, run.batch, run.compute_loss, run.optimizer, autocast=autocast, scaler=scaler,
                          loop=o.loop, zero_grad=o.zero_grad,
                          saved_tensors=real_offload_context if o.activation_offload else None)


def precision_context(opts: TrainingOptions, device: str):
    """(autocast factory or None, GradScaler or None) for ``train_iteration`` on a real ``device``:
    ``torch.autocast(device, dtype)`` for the mixed precisions and ``torch.amp.GradScaler`` for
    fp16-mixed -- the real objects whose behaviour the meta trace emulates."""
    dtype = AUTOCAST_DTYPE.get(opts.precision)
    device_type = torch.device(device).type
    autocast = None if dtype is None else (lambda: torch.autocast(device_type, dtype=dtype))
    return autocast, make_scaler(opts.precision, device)
