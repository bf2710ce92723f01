"""Trace a whole training run (several iterations) of a model on the meta device."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from memgraph.collector import paused_gc
from memgraph.compiled import CompiledStep
from memgraph.errors import MemgraphError
from memgraph.facts.gpus import get_gpu
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.frame_stack import on_deep_frame_stack
from memgraph.model_spec.lora import finetuning_notes
from memgraph.model_spec.modality import module_modalities
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import AUTOCAST_DTYPE, PRECISION_DTYPE_NAME, TrainingOptions
from memgraph.model_spec.quantize import parameters_per_element
from memgraph.model_spec.sources import ModelSpec
from memgraph.notes import Note
from memgraph.private_api import grad_scaler_state
from memgraph.step.activation_offload import OffloadEmulation
from memgraph.trace.emulate.autocast_emulation import (
    AutocastStats,
    autocast_factory,
    checkpoint_context_fn,
    emulation_region,
)
from memgraph.trace.emulate.cuda_library_workspaces import CudaRuntime
from memgraph.trace.shortcuts.depth_run import trace_with_depth_synthesis
from memgraph.trace.parallel.distributed import distributed_run
from memgraph.trace.record import progress
from memgraph.trace.record.event_log import EventLog, Origin, Role
from memgraph.step.fused_optimizers import fused_on_meta
from memgraph.step.grad_scaler import make_scaler
from memgraph.step.layerdrop import every_layer_runs, layerdrop_note
from memgraph.trace.record.module_tracking import ModuleStack
from memgraph.trace.record.op_cache import op_cache
from memgraph.trace.emulate.meta_kernels import MetaKernelFixes
from memgraph.trace.record.recorder import Recorder
from memgraph.trace.record.step_hooks import host_type, saved_tensor_hooks, workspace_of
from memgraph.trace.emulate.sdpa_kernels import KernelStats, kernel_factory
from memgraph.trace.model_errors import model_failures
from memgraph.trace.shadow_values import ShadowValues
from memgraph.step import build_step
from memgraph.step.optimizer_in_backward import OptimizerInBackward
from memgraph.model_spec.kinds import model_kind


@dataclass
class Trace:
    """The recorded run: the storage event log plus facts about the setup."""

    log: EventLog
    iteration_bounds: list[tuple[int, int]]  # per iteration: [first event, end event)
    parameter_count: int
    trainable_parameter_count: int
    batch: list[str]  # input descriptions, e.g. "input_ids=int64[1,2048]"
    optimizer_impl: str
    seconds: float
    trainable_sids: set[int]
    notes: list[str] = field(default_factory=list)
    modalities: dict[str, str] = field(default_factory=dict)  # module path -> modality group (model_spec/modality.py)
    unknowns: list[BoundedUnknown] = field(default_factory=list)  # bounded unknowns the trace met (facts/unknowns.py)
    assumptions: list[str] = field(default_factory=list)  # the loop's defaults, resolved (model_spec/defaults.py)
    model_kind: str = "other"  # the key of the validated error band (model_spec/kinds.py)
    rank_layouts: list[tuple] | None = None  # every rank's layout known only after the step ran (DeepSpeed ZeRO-1/2)


@on_deep_frame_stack  # Dynamo's and Inductor's deep calls without an mmap per call (memgraph/frame_stack.py)
def trace_training(spec: ModelSpec, opts: TrainingOptions, rank: int = 0) -> Trace:
    """Run ``opts.iterations`` training iterations of ``spec`` on meta, recording everything.

    With ``--depth-synthesis auto`` a deep model is traced at a few small depths and the full depth is
    synthesized from them, verified exact (memgraph/trace/shortcuts/depth_run.py); otherwise every layer is traced."""
    with paused_gc():  # millions of small records that live to the end (memgraph/collector.py)
        return trace_with_depth_synthesis(spec, opts, lambda s: _trace_all_layers(s, opts, rank))


def _trace_all_layers(spec: ModelSpec, opts: TrainingOptions, rank: int = 0) -> Trace:
    # the wrapper runs the resolved options too (the FSDP2 policy of model_spec/framework_defaults.py)
    with distributed_run(resolve_defaults(spec, opts).options, rank=rank) as run:  # --strategy: the fake process group of `rank`, set up and torn down
        return _trace_training(spec, opts, run)


def _trace_training(spec: ModelSpec, opts: TrainingOptions, run) -> Trace:
    start = time.perf_counter()
    device = "meta"
    progress.stage("building the model")
    # constructor_values: real values for constructors that compute with tensors (build.py _construct)
    step = build_step(spec, opts, device, run, constructor_values=ShadowValues,
                      # --compile: Dynamo takes no custom context_fn (the checkpointed regions' recompute is in its
                      # graphs, the emulations traced in by the backend: memgraph/compiled/step.py)
                      checkpoint_context_fn=None if opts.compile else checkpoint_context_fn)
    opts, model, batch_spec, batch, trainable = step.options, step.model, step.batch_spec, step.batch, step.trainable
    shadows = ShadowValues()  # real values of the small integer inputs (token layout, grid sizes)
    # Also with gradient checkpointing: transformers then checks position ids (an arange) for packed
    # sequences with .all().item() (masking_utils.find_packed_sequence_indices), which needs values.
    has_values = shadows.attach_batch(batch_spec, batch)
    values = shadows if has_values or opts.gradient_checkpointing else contextlib.nullcontext()
    optimizer = step.optimizer

    modules = ModuleStack(model)
    runtime = CudaRuntime(get_gpu(opts.gpu)) if opts.target == "cuda" else None
    rec = run.recorder_type(module_of=lambda: modules.current, device_type=device, host_type=host_type(opts.target),
                            workspace_of=workspace_of(opts.target, runtime), on_op=runtime)
    run.attach(rec)
    progress.watch(rec.log)
    progress.stage("tracing")
    owners = _parameter_owners(model)
    _register_existing(rec, model, batch, owners)
    trainable_sids = {rec.sid_of(p) for p in trainable}
    if isinstance(optimizer, OptimizerInBackward):  # gradients live (and die) inside backward
        optimizer.on_grad = lambda p: rec.mark_role(p.grad, Role.GRADIENT, owners.get(id(p)))

    def mark_gradients() -> None:
        for p in trainable:
            if p.grad is not None:
                rec.mark_role(p.grad, Role.GRADIENT, owners.get(id(p)))

    def set_phase(phase: str) -> None:
        if phase in ("optimizer", "zero_grad"):  # backward is done: the .grad storages are the gradients
            mark_gradients()
        rec.enter(rec.iteration, phase)
        if phase == "backward":
            modules.reset()

    forward_context, kernel_stats, autocast_stats = _forward_emulation(opts, device)
    if autocast_stats is not None:  # the weight-cast cache is its own category (analysis/categorize.py)
        autocast_stats.on_cache = lambda t: rec.mark_role(t, Role.AUTOCAST_CACHE, modules.current)
    scaler = None if opts.deepspeed else make_scaler(opts.precision, device)  # DeepSpeed scales its own loss
    compiled = CompiledStep(opts, forward_context) if opts.compile else None  # --compile: memgraph/compiled/
    if compiled:  # the loop calls the compiled model, loss, optimizer step (memgraph/compiled/step.py)
        compiled.wrap_step(step)

    kv_cache = _KVCacheWatch(rec)
    offload = OffloadEmulation(opts.target, rec.mark_saved) if opts.activation_offload else None
    rec.enter(0, "setup")
    bounds = []
    fixes = MetaKernelFixes(opts.target)  # below the recorder: meta kernels corrected to the target's (MoE, conv)
    with fused_on_meta(), every_layer_runs(model) as dropped, compiled.modules(modules) if compiled else modules, op_cache(), values, fixes, \
            rec, \
            saved_tensor_hooks(rec), \
            (compiled.context() if compiled else contextlib.nullcontext()):  # rec on top of values
        for it in range(1, opts.iterations + 1):
            rec.iteration = it
            first = len(rec.log.events)
            with model_failures(spec.name, lambda: (rec.phase, modules.current, rec.iteration)):
                step.iteration(set_phase, autocast=forward_context, scaler=run.engine_loop if opts.deepspeed else scaler,
                               saved_tensors=offload and offload.context,
                               compute_loss=kv_cache.watch(step.compute_loss))
            mark_gradients()  # --zero-grad zero / none: the gradients stay allocated
            _mark_optimizer_state(rec, run.local_optimizer(optimizer), owners)
            if scaler is not None:  # GradScaler's _scale / _growth_tracker: training state kept across steps
                for t in grad_scaler_state(scaler):
                    rec.mark_role(t, Role.OPTIMIZER_STATE)
            bounds.append((first, len(rec.log.events)))
            if compiled:  # between the iterations, as the measurement does (measure/real_step.py)
                compiled.collect_garbage(rec.log, it)
    rec.close()
    progress.watch(None)
    params = list(model.parameters())
    return Trace(
        log=rec.log, iteration_bounds=bounds,
        parameter_count=sum(_numel(p, opts.quantize) for p in params),
        trainable_parameter_count=sum(_numel(p, opts.quantize) for p in params if p.requires_grad),
        batch=[s.describe() for s in batch_spec.inputs], optimizer_impl=step.optimizer_impl,
        seconds=time.perf_counter() - start, trainable_sids=trainable_sids, modalities=module_modalities(model),
        notes=(list(batch_spec.notes) + _emulation_notes(opts, kernel_stats, autocast_stats, scaler) + shadows.notes()
               + finetuning_notes(model, optimizer) + layerdrop_note(dropped)
               + (kv_cache.notes() if opts.loop == "plain" else []) + run.notes()
               + (offload.notes(opts.iterations) if offload else []) + (compiled.notes() if compiled else [])),
        unknowns=((runtime.kernels.unknowns() if runtime is not None else []) + run.unknowns()
                  + (compiled.unknowns() if compiled else [])),
        assumptions=step.assumptions, model_kind=model_kind(spec.task, model), rank_layouts=run.rank_layouts(),
    )


def _numel(p: torch.nn.Parameter, quantize: str | None = None) -> int:
    """A parameter's count of the model's parameters; DeepSpeed ZeRO-3 leaves an empty tensor and the count in
    ``ds_numel``; a packed 4-bit weight holds two per stored byte (model_spec/quantize.py parameters_per_element)."""
    return getattr(p, "ds_numel", None) or p.numel() * parameters_per_element(quantize, str(p.dtype).removeprefix("torch."))


def _forward_emulation(opts: TrainingOptions, device: str):
    """The context forward + loss run in on ``device`` (meta): the target's attention/dropout kernels
    (:mod:`memgraph.trace.emulate.sdpa_kernels`) and, for the mixed precisions, emulated CUDA autocast
    (:mod:`memgraph.trace.emulate.autocast_emulation`), in that order: autocast lies on top, so it casts first and
    the kernel choice sees the cast q/k/v, as on a GPU (the SDPA autocast kernel runs before the
    backend choice)."""
    cc, where = None, "cpu"
    if opts.target == "cuda":
        cc = get_gpu(opts.gpu).compute_capability
        where = f"sm{cc[0]}{cc[1]}"
    kernel_stats = KernelStats(opts.target, where)
    force = "flash" if opts.attn_implementation == "flash_attention_2" else None
    factories = [kernel_factory(opts.target, cc, kernel_stats, device, force=force)]
    autocast_stats = None
    if opts.precision in AUTOCAST_DTYPE and not (opts.fsdp_mixed_precision or opts.deepspeed):  # they cast instead
        autocast_stats = AutocastStats(AUTOCAST_DTYPE[opts.precision])
        factories.append(autocast_factory(autocast_stats, device))
    return (lambda: emulation_region(*factories)), kernel_stats, autocast_stats


def _emulation_notes(opts: TrainingOptions, kernel_stats: KernelStats, autocast_stats, scaler) -> list[str]:
    """What the trace emulated of the target (Trace.notes)."""
    notes = []
    if opts.attn_implementation == "flash_attention_2":
        notes.append("flash_attention_2: traced as transformers' sdpa path with PyTorch's flash SDPA kernel forced "
                     "(the same FlashAttention-2 kernel; same tensors saved for backward)")
    notes += kernel_stats.describe(opts.iterations, compiled=opts.compile)
    if autocast_stats is not None:
        notes.append(autocast_stats.describe())
    if scaler is not None:
        notes.append("GradScaler: torch.amp.GradScaler run on meta (scale tensors, scaled loss, in-place unscale of "
                     "the gradients via _amp_foreach_non_finite_check_and_unscale_, found_inf per device); "
                     "gradients assumed finite, so every step runs")
    if opts.precision in ("bf16", "fp16"):
        dtype = PRECISION_DTYPE_NAME[opts.precision]
        notes.append(f"{opts.precision}: parameters, gradients, optimizer state and floating inputs in {dtype}, "
                     "no autocast" + (", no GradScaler" if opts.precision == "fp16" else ""))
    return notes


def _parameter_owners(model: torch.nn.Module) -> dict[int, str]:
    """id(parameter) -> path of the first module that owns it."""
    owners: dict[int, str] = {}
    for mod_name, mod in model.named_modules():
        for p in mod.parameters(recurse=False):
            owners.setdefault(id(p), mod_name)
    return owners


def _register_existing(rec: Recorder, model: torch.nn.Module, batch: tuple[tuple, dict],
                       owners: dict[int, str]) -> None:
    for name, p in model.named_parameters(remove_duplicate=True):
        rec.register(p, Origin.PARAMETER, name, owners.get(id(p), ""))
    for name, b in model.named_buffers():
        if b is not None and rec.tracks(b):  # host buffers too on the cpu target (Recorder.host_type)
            rec.register(b, Origin.BUFFER, name, name.rpartition(".")[0])
    args, kwargs = batch
    for name, t in [(f"input {i}", a) for i, a in enumerate(args)] + list(kwargs.items()):
        if isinstance(t, torch.Tensor):
            rec.register(t, Origin.INPUT, name)


class _KVCacheWatch:
    """Bytes of the key/value cache a transformers forward returns (``outputs.past_key_values``).

    With ``config.use_cache`` True (the default of most LM configs) a training forward builds a KV
    cache (DynamicCache). Its copies of every layer's keys and values replace the originals that
    attention saves for backward (no extra cost until then), but the outputs still reference them
    after backward, so they live through the optimizer step: often a surprise, so it is named.
    """

    def __init__(self, rec: Recorder):
        self.rec = rec
        self.bytes = 0

    def watch(self, loss_fn):
        def wrapped(outputs):
            cache = getattr(outputs, "past_key_values", None)
            if cache is not None:
                sids = {self.rec.sid_of(t) for t in _tensors_in(cache)} - {None}
                self.bytes = sum(self.rec.log.storages[sid].nbytes for sid in sids)
            return loss_fn(outputs)

        return wrapped

    def notes(self) -> list[str]:
        if not self.bytes:
            return []
        return [Note("KV cache: the model's config has use_cache=True, so each forward also builds a key/value cache "
                     "({bytes:bytes}); the outputs the loop holds keep it alive after backward, through the optimizer "
                     "step. Calling the model with use_cache=False (--no-kv-cache), or keeping only the loss (--loop trainer), frees "
                     "it with the other activations", per_layer=("bytes",), bytes=self.bytes)]


def _tensors_in(obj, depth: int = 4):
    """Tensors reachable from ``obj`` through lists, tuples, dicts and object attributes."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth > 0:
        items = (obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple))
                 else vars(obj).values() if hasattr(obj, "__dict__") else ())
        for item in items:
            yield from _tensors_in(item, depth - 1)


def _mark_optimizer_state(rec: Recorder, optimizer: torch.optim.Optimizer, owners: dict[int, str]) -> None:
    """Name the storages that are optimizer state, attributed to their parameter's module."""
    if optimizer is None:  # --optimizer none
        return
    for param, state in optimizer.state.items():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                rec.mark_role(value, Role.OPTIMIZER_STATE, owners.get(id(param)))


__all__ = ["Trace", "trace_training"]
