"""The training step on a real device: the one the trace records (memgraph/step/), seeded, with the real
autocast, GradScaler and offload hooks."""

from __future__ import annotations

import gc

import torch

from memgraph.compiled import compile_step_for_real
from memgraph.model_spec.options import AUTOCAST_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.step import Step, build_step
from memgraph.step.activation_offload import real_offload_context
from memgraph.step.grad_scaler import make_scaler
from memgraph.step.layerdrop import every_layer_runs

SEED = 0


def build_run(spec: ModelSpec, opts: TrainingOptions, device: str, distributed=None) -> Step:
    """The training step (step/build.py, the one the trace records) with random weights and inputs on ``device``,
    seeded with :data:`SEED`.

    ``distributed``: a :class:`~memgraph.trace.parallel.distributed.DistributedRun` in an initialised process group
    (measure/distributed.py): it wraps the model and partitions the optimizer as the trace does."""
    step = build_step(spec, opts, device, distributed, seed=SEED)
    if step.options.compile:  # --compile: torch.compile(model, mode=...) as a user writes it (memgraph/compiled/step.py)
        compile_step_for_real(step)
    return step


def run_iteration(run: Step, autocast=None, scaler=None) -> None:
    """One iteration of ``run`` with its resolved loop options, every layer run (LayerDrop off, as in the trace:
    step/layerdrop.py), activations offloaded by PyTorch's own ``save_on_cpu`` with ``--activation-offload``."""
    with every_layer_runs(run.model):
        run.iteration(autocast=autocast, scaler=scaler,
                      saved_tensors=real_offload_context if run.options.activation_offload else None)


def collect_compile_garbage(run: Step) -> None:
    """With --compile, free Dynamo's tracing state after an iteration instead of at Python's next full collection.

    A compiling iteration leaves Dynamo's tracing state (its OutputGraph, InstructionTranslators, FakeTensorMode, ...)
    as cyclic garbage, and with it CPU allocations: 149,444 B on tiny Whisper (torch 2.13.0, --compile), freed by
    ``gc.collect()``. Whether Python's automatic collection frees it before the next iteration depends on the
    process's history (it did in a fresh process on this machine; it did not on CI's machine, nor after an earlier
    trace in the same process), so the measured steady state would depend on that too. The callers run this
    outside the iterations' measured ranges; the prediction is of the step without that garbage."""
    if run.options.compile:
        gc.collect()


def precision_context(opts: TrainingOptions, device: str):
    """(autocast factory or None, GradScaler or None) for ``train_iteration`` on a real ``device``:
    ``torch.autocast(device, dtype)`` for the mixed precisions and ``torch.amp.GradScaler`` for
    fp16-mixed -- the real objects whose behaviour the meta trace emulates."""
    dtype = AUTOCAST_DTYPE.get(opts.precision)
    device_type = torch.device(device).type
    autocast = None if dtype is None else (lambda: torch.autocast(device_type, dtype=dtype))
    return autocast, make_scaler(opts.precision, device)
