"""Build the real model, batch and optimizer exactly as the tracer does, on a real device."""

from __future__ import annotations

import torch

from ..spec.optimizers import make_optimizer, resolve_impl
from ..spec.options import TrainingOptions
from ..spec.source import ModelSpec
from ..trace.run import PRECISION_DTYPE, build_model

SEED = 0


def build_run(spec: ModelSpec, opts: TrainingOptions, device: str):
    """(model, batch, optimizer, optimizer implementation) with random weights and inputs on ``device``."""
    torch.manual_seed(SEED)
    model = build_model(spec, opts, device)
    batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
    gen = torch.Generator().manual_seed(SEED)
    batch = batch_spec.make(device, gen)
    impl = resolve_impl(opts.optimizer_impl, opts.target)
    optimizer = make_optimizer(opts.optimizer, [p for p in model.parameters() if p.requires_grad], impl)
    return model, batch, optimizer, impl
