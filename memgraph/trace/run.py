"""Trace a whole training run (several iterations) of a model on the meta device."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..errors import MemgraphError, TraceError
from ..ops.registry import workspace_bytes
from ..spec.optimizers import make_optimizer, resolve_impl
from ..spec.options import TrainingOptions
from ..spec.source import ModelSpec
from ..spec.tasks import loss_from_outputs
from ..spec.trainable import apply_trainable
from .modules import ModuleStack
from .recorder import Recorder
from .step import train_iteration

PRECISION_DTYPE = {"fp32": torch.float32}


@dataclass
class Trace:
    """The recorded run: the recorder's graph/storages/events plus facts about the setup."""

    recorder: Recorder
    iteration_bounds: list[tuple[int, int]]  # per iteration: [first event, end event)
    parameter_count: int
    trainable_parameter_count: int
    batch: list[str]  # input descriptions, e.g. "input_ids=int64[1,2048]"
    optimizer_impl: str
    seconds: float
    trainable_sids: set[int]
    notes: list[str] = field(default_factory=list)


def build_model(spec: ModelSpec, opts: TrainingOptions, device: str) -> torch.nn.Module:
    """Build ``spec`` on ``device`` in training mode with the requested parameters trainable."""
    dtype = PRECISION_DTYPE[opts.precision]
    try:
        with torch.device(device):
            model = spec.build(opts, dtype)
    except MemgraphError:
        raise
    except Exception as e:
        raise MemgraphError(f"building {spec.name} failed: {type(e).__name__}: {e}") from e
    if any(p.device.type != torch.device(device).type for p in model.parameters()):
        model = model.to(device)
    model.train()
    apply_trainable(model, opts.train, opts.freeze)
    if opts.gradient_checkpointing:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise MemgraphError(f"{spec.name} does not support gradient checkpointing: drop --gradient-checkpointing")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def trace_training(spec: ModelSpec, opts: TrainingOptions) -> Trace:
    """Run ``opts.iterations`` training iterations of ``spec`` on meta, recording everything."""
    start = time.perf_counter()
    device = "meta"
    model = build_model(spec, opts, device)
    batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
    batch = batch_spec.make(device)
    impl = resolve_impl(opts.optimizer_impl, opts.target)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(opts.optimizer, trainable, impl)

    modules = ModuleStack(model)
    rec = Recorder(module_of=lambda: modules.current, device_type=device,
                   workspace_of=lambda op, a, k, out: workspace_bytes(op, opts.target, a, k, out),
                   on_op=_runtime_hook(opts))
    _register_existing(rec, model, batch)
    trainable_sids = {rec.sid_of(p) for p in trainable}

    owners = _parameter_owners(model)

    def set_phase(phase: str) -> None:
        if phase == "optimizer":  # backward is done: the .grad storages are the gradients
            for p in trainable:
                if p.grad is not None:
                    rec.mark_role(p.grad, "gradient", owners.get(id(p)))
        rec.enter(rec.iteration, phase)
        if phase == "backward":
            modules.reset()

    rec.enter(0, "setup")
    bounds = []
    with modules, rec, torch.autograd.graph.saved_tensors_hooks(_pack(rec), _unpack):
        for it in range(1, opts.iterations + 1):
            rec.iteration = it
            first = len(rec.events)
            train_iteration(model, batch, loss_from_outputs, optimizer, set_phase)
            _mark_optimizer_state(rec, optimizer, owners)
            bounds.append((first, len(rec.events)))
    rec.close()
    params = list(model.parameters())
    return Trace(
        recorder=rec, iteration_bounds=bounds,
        parameter_count=sum(p.numel() for p in params),
        trainable_parameter_count=sum(p.numel() for p in params if p.requires_grad),
        batch=[s.describe() for s in batch_spec.inputs], optimizer_impl=impl,
        seconds=time.perf_counter() - start, trainable_sids=trainable_sids,
    )


def _runtime_hook(opts: TrainingOptions):
    """Allocations CUDA libraries make through the caching allocator (cuda target only)."""
    if opts.target != "cuda":
        return None
    from ..allocator.cuda_runtime import CudaLibraryWorkspaces
    from ..gpu.catalog import get_gpu

    return CudaLibraryWorkspaces(get_gpu(opts.gpu))


def _parameter_owners(model: torch.nn.Module) -> dict[int, str]:
    """id(parameter) -> path of the first module that owns it."""
    owners: dict[int, str] = {}
    for mod_name, mod in model.named_modules():
        for p in mod.parameters(recurse=False):
            owners.setdefault(id(p), mod_name)
    return owners


def _register_existing(rec: Recorder, model: torch.nn.Module, batch: tuple[tuple, dict]) -> None:
    owners = _parameter_owners(model)
    for name, p in model.named_parameters(remove_duplicate=True):
        rec.register(p, "parameter", name, owners.get(id(p), ""))
    for name, b in model.named_buffers():
        if b is not None and b.device.type == rec.device_type:
            rec.register(b, "buffer", name, name.rpartition(".")[0])
    args, kwargs = batch
    for name, t in [(f"input {i}", a) for i, a in enumerate(args)] + list(kwargs.items()):
        if isinstance(t, torch.Tensor):
            rec.register(t, "input", name)


def _pack(rec: Recorder):
    def pack(t):
        rec.mark_saved(t)
        return t

    return pack


def _unpack(t):
    return t


def _mark_optimizer_state(rec: Recorder, optimizer: torch.optim.Optimizer, owners: dict[int, str]) -> None:
    """Name the storages that are optimizer state, attributed to their parameter's module."""
    for param, state in optimizer.state.items():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                rec.mark_role(value, "optimizer_state", owners.get(id(param)))


__all__ = ["Trace", "trace_training", "build_model", "TraceError"]
