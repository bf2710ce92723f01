"""Build the real model, batch and optimizer exactly as the tracer does, on a real device."""

from __future__ import annotations

import torch

from memgraph.model_spec.build import build_model
from memgraph.model_spec.optimizers import resolve_impl
from memgraph.model_spec.options import AUTOCAST_DTYPE, PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.trace.grad_scaler import make_scaler
from memgraph.trace.optimizer_in_backward import make_step_optimizer

SEED = 0


def build_run(spec: ModelSpec, opts: TrainingOptions, device: str):
    """(model, batch, optimizer, optimizer implementation) with random weights and inputs on ``device``."""
    torch.manual_seed(SEED)
    model = build_model(spec, opts, device)
    batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
    gen = torch.Generator().manual_seed(SEED)
    batch = batch_spec.make(device, gen)
    impl = resolve_impl(opts.optimizer_impl, opts.target)
    optimizer = make_step_optimizer(opts, [p for p in model.parameters() if p.requires_grad], impl)
    return model, batch, optimizer, impl


def precision_context(opts: TrainingOptions, device: str):
    """(autocast factory or None, GradScaler or None) for ``train_iteration`` on a real ``device``:
    ``torch.autocast(device, dtype)`` for the mixed precisions and ``torch.amp.GradScaler`` for
    fp16-mixed -- the real objects whose behaviour the meta trace emulates."""
    dtype = AUTOCAST_DTYPE.get(opts.precision)
    device_type = torch.device(device).type
    autocast = None if dtype is None else (lambda: torch.autocast(device_type, dtype=dtype))
    return autocast, make_scaler(opts.precision, device)
