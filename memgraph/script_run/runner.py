"""Run the user's script on meta under the recorder, stop it after N optimizer steps, and analyse the trace.

The pieces of ``analyze``'s tracer are reused as they are: the recorder (memgraph/trace/recorder.py) with the
tracer's host type, workspaces and saved-tensor hooks, the SDPA kernel choice (trace/sdpa_kernels.py), the
autocast emulation (trace/autocast_emulation.py), fused optimizers and meta-kernel fixes, the CUDA runtime's
library workspaces; then ``result_of_trace`` (memgraph/api.py): the same analysis, allocator replay and report.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import runpy
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, replace
from unittest import mock

import torch

from memgraph.errors import MemgraphError
from memgraph.facts.gpus import get_gpu
from memgraph.frame_stack import on_deep_frame_stack
from memgraph.model_spec.modality import module_modalities
from memgraph.model_spec.options import TrainingOptions
from memgraph.private_api import foreach_kernels_also_on, grad_scalers_assume_finite_grads
from memgraph.script_run.cuda_stand_in import AutocastEmulations, DeviceCounters, autocast_queries, cuda_stand_in
from memgraph.script_run.device_mode import ScriptDeviceMode
from memgraph.script_run.distributed import fake_world, world_notes
from memgraph.script_run.loop_watch import LoopWatch, StopScript
from memgraph.script_run.value_reads import ValueReads, script_line
from memgraph.script_run.weights import load_notes, weights_on_meta
from memgraph.trace.record import progress
from memgraph.trace.emulate.cuda_library_workspaces import CudaRuntime
from memgraph.trace.parallel.distributed import DistributedRecorder
from memgraph.trace.record.event_log import Role
from memgraph.step.fused_optimizers import fused_on_meta
from memgraph.trace.emulate.meta_kernels import MetaKernelFixes
from memgraph.trace.record.recorder import Recorder
from memgraph.trace.record.op_cache import op_cache
from memgraph.trace.emulate.sdpa_kernels import KernelStats, kernel_factory
from memgraph.trace.shadow_values import ShadowValues
from memgraph.trace.record.step_hooks import host_type, saved_tensor_hooks, workspace_of
from memgraph.trace.tracer import Trace


@dataclass(frozen=True)
class ScriptCommand:
    """What follows ``--``: ``SCRIPT.py ARGS...`` or ``-m MODULE ARGS...``."""

    argv: tuple[str, ...]

    @property
    def is_module(self) -> bool:
        return self.argv[0] == "-m"

    @property
    def name(self) -> str:
        return self.argv[1] if self.is_module else os.path.basename(self.argv[0])

    @property
    def args(self) -> list[str]:
        return list(self.argv[2:] if self.is_module else self.argv[1:])

    def check(self) -> str:
        """The script's file (a one-line error when there is none); nothing of it runs here."""
        if not self.argv or (self.is_module and len(self.argv) < 2):
            raise MemgraphError("memgraph run needs a script: memgraph run [options] -- train.py [ARGS...] "
                                "(or -- -m MODULE [ARGS...])")
        if self.is_module:
            try:
                spec = importlib.util.find_spec(self.argv[1])
            except (ImportError, ValueError) as e:
                spec, _ = None, e
            if spec is None or spec.origin is None:
                raise MemgraphError(f"no module named {self.argv[1]!r} to run: check the name and sys.path")
            return os.path.abspath(spec.origin)
        path = self.argv[0]
        if not os.path.isfile(path):
            raise MemgraphError(f"script {path!r} does not exist: give the path of a Python file")
        return os.path.abspath(path)

    def run(self) -> None:
        """The script as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` runs it, in this process."""
        if self.is_module:
            runpy.run_module(self.argv[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(self.argv[0], run_name="__main__")


@on_deep_frame_stack  # the user's own deep calls without an mmap per call (memgraph/frame_stack.py)
def run_script(command: ScriptCommand, opts: TrainingOptions, nproc: int = 1) -> tuple[Trace, dict]:
    """Run ``command`` until ``opts.iterations`` optimizer steps are made, recorded on meta: the trace, and the
    report's options (analyze's keys, with what the script did for precision, optimizer and loop). ``nproc``: the
    world the script's ``torch.distributed.init_process_group`` makes (it runs as rank 0)."""
    script = command.check()
    start = time.perf_counter()
    runtime = CudaRuntime(get_gpu(opts.gpu)) if opts.target == "cuda" else None
    recorder_type = DistributedRecorder if nproc > 1 else Recorder  # DTensors, DDP's bucket-index broadcast
    rec = recorder_type(device_type="meta", host_type=host_type(opts.target),
                        workspace_of=workspace_of(opts.target, runtime))
    watch = LoopWatch(rec, opts.iterations)
    rec.on_op = watch.on_op if runtime is None else _both(runtime, watch.on_op)
    reads = ValueReads(frozenset({script}))
    device = "cuda" if opts.target == "cuda" else "cpu"
    cc = get_gpu(opts.gpu).compute_capability if opts.target == "cuda" else None
    kernel_stats = KernelStats(opts.target, f"sm{cc[0]}{cc[1]}" if cc else "cpu")
    autocasts = AutocastEmulations(lambda t: rec.mark_role(t, Role.AUTOCAST_CACHE, rec._module()), opts.target)
    skipped: Counter = Counter()
    shadows = ShadowValues()
    backends: Counter = Counter()  # init_process_group calls, by the backend asked for
    loads: Counter = Counter()  # weight loads built on meta (script_run/weights.py)
    progress.stage(f"running {command.name}")
    progress.watch(rec.log)
    stopped = False
    with contextlib.ExitStack() as stack:
        stack.callback(progress.watch, None)
        stack.enter_context(script_argv(command, script))
        stack.enter_context(contextlib.redirect_stdout(sys.stderr))  # the script's prints: not in the report
        if opts.target == "cuda":
            stack.enter_context(cuda_stand_in(get_gpu(opts.gpu), DeviceCounters(rec.log, "cuda"), autocasts))
            stack.enter_context(foreach_kernels_also_on("meta"))
        else:
            stack.enter_context(autocast_queries(autocasts))
        stack.enter_context(mock.patch.object(torch, "save", lambda *_a, **_k: skipped.update(["torch.save"])))
        stack.enter_context(weights_on_meta(loads))
        stack.enter_context(fake_world(nproc, backends))
        stack.enter_context(_swapped_on_conversion())
        stack.enter_context(fused_on_meta())
        stack.enter_context(grad_scalers_assume_finite_grads())
        stack.enter_context(watch.hooks())
        stack.enter_context(op_cache())  # the lowest mode: repeated meta kernels answered from memory
        stack.enter_context(MetaKernelFixes(opts.target))
        stack.enter_context(shadows)  # below the recorder: host data copied to the device keeps its values
        stack.enter_context(rec)
        stack.enter_context(saved_tensor_hooks(rec))
        stack.enter_context(kernel_factory(opts.target, cc, kernel_stats)())
        stack.enter_context(ScriptDeviceMode(device, reads, watch.on_backward, lambda t: shadows.value(t) is not None))
        try:
            command.run()
        except StopScript:
            stopped = True
        except SystemExit as e:
            if e.code not in (None, 0):
                raise MemgraphError(f"{command.name} exited with status {e.code!r} after {watch.done} optimizer "
                                    f"step(s){_where(e, script)}") from None
        except MemgraphError as e:
            raise MemgraphError(f"{_where(e, script, lead=True)}{e}") from e
        except Exception as e:  # noqa: BLE001 - the user's script failed: one line saying where and what
            first = str(e).splitlines()[0] if str(e) else ""
            raise MemgraphError(f"{_where(e, script, lead=True)}{type(e).__name__}: {first} (memgraph run runs "
                                "the script on meta tensors: see README, 'memgraph run')") from e
    rec.close()
    trace = _trace(command, opts, rec, watch, stopped, time.perf_counter() - start,
                   notes=_notes(command, opts, watch, stopped, reads, kernel_stats, autocasts, skipped)
                  + shadows.notes() + world_notes(nproc, backends) + load_notes(loads),
                   unknowns=runtime.kernels.unknowns() if runtime is not None else [])
    return trace, {**_options(command, opts, watch, autocasts), "nproc": nproc}


_PRECISION = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _options(command: ScriptCommand, opts: TrainingOptions, watch: LoopWatch, autocasts: AutocastEmulations) -> dict:
    """The report's ``options``: analyze's keys (the renderers read them), with the script's choices where it made
    them: precision (autocast's dtype, else the parameters'), optimizer, loop ``script``."""
    if autocasts.stats:
        precision = "+".join(f"{_PRECISION.get(d, str(d))}-mixed" for d in autocasts.stats)
    else:
        precision = _PRECISION.get(next(watch.model.parameters()).dtype, "other")
    optimizer = ", ".join(type(o).__name__.lower() for o in watch.optimizers.values()) or "none"
    return {**opts.to_dict(), "precision": precision, "optimizer": optimizer, "optimizer_impl": _optimizer_impl(watch),
            "attn_implementation": "as the script builds it", "loop": "script", "script": list(command.argv),
            "steps": opts.iterations}


@contextlib.contextmanager
def _swapped_on_conversion():
    """``model.to(device)`` keeps each parameter object (``torch.__future__`` swap on conversion, public API).

    On a GPU, ``Module._apply`` moves a host parameter to CUDA with ``param.data = moved`` (the same Parameter);
    host and meta tensors are not shallow-copy compatible, so a move to meta would make a new Parameter per
    module instead, and a tied weight (GPT-2's wte / lm_head) would become two. Swapping keeps one."""
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        yield
    finally:
        torch.__future__.set_swap_module_params_on_conversion(before)


def _both(first, second):
    def on_op(rec, info):
        first(rec, info)
        second(rec, info)

    return on_op


@contextlib.contextmanager
def script_argv(command: ScriptCommand, script: str):
    """``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT ARGS`` sets them; restored afterwards."""
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [script, *command.args]
    if not command.is_module:
        sys.path.insert(0, os.path.dirname(script))
    try:
        yield
    finally:
        sys.argv[:], sys.path[:] = argv, path


def _where(e: BaseException, script: str, lead: bool = False) -> str:
    """The innermost line of the script in ``e``'s traceback: " at train.py:31 `...`" (or "train.py:31 `...`: ")."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename) == script]
    if not frames:
        return ""
    line = script_line(script, frames[-1].lineno)
    return f"{line}: " if lead else f" at {line}"


def _trace(command: ScriptCommand, opts: TrainingOptions, rec: Recorder, watch: LoopWatch, stopped: bool,
           seconds: float, notes: list[str], unknowns: list) -> Trace:
    if watch.model is None:
        raise MemgraphError(f"{command.name} ran to its end without calling a module with parameters: memgraph run "
                            "predicts a training loop (a model's forward, backward and optimizer.step())")
    if watch.done < 2:
        raise MemgraphError(f"{command.name} ended after {watch.done} optimizer step(s): memgraph run needs 2 or more "
                            "(the first step and the steady state); let the script run more steps")
    bounds = watch.bounds()[:watch.done]
    params = list(watch.model.parameters())
    trainable = watch.trainable()
    return Trace(
        log=rec.log, iteration_bounds=bounds, parameter_count=sum(p.numel() for p in params),
        trainable_parameter_count=sum(p.numel() for p in params if p.requires_grad), batch=watch.inputs,
        optimizer_impl=_optimizer_impl(watch), seconds=seconds,
        trainable_sids={s for s in (rec.sid_of(p) for p in trainable) if s is not None},
        notes=notes, modalities=module_modalities(watch.model), unknowns=unknowns)


def _optimizer_impl(watch: LoopWatch) -> str:
    """``AdamW (fused)``: each optimizer's class and implementation, as the script built it."""
    out = []
    for opt in watch.optimizers.values():
        group = opt.param_groups[0] if opt.param_groups else {}
        impl = "fused" if group.get("fused") else "foreach" if group.get("foreach") else (
            "default" if group.get("foreach") is None else "for-loop")
        out.append(f"{type(opt).__name__} ({impl})")
    return ", ".join(out) or "none"


def _notes(command, opts, watch, stopped, reads, kernel_stats, autocasts, skipped) -> list[str]:
    how = (f"stopped after {watch.done} optimizer steps (--steps)" if stopped
           else f"the script ended by itself after {watch.done} optimizer steps")
    notes = [f"memgraph run: {command.name} {' '.join(command.args)} ran unmodified on meta tensors; {how}; "
             f"the model is {type(watch.model).__name__} (the first module with parameters it called)"]
    notes += kernel_stats.describe(watch.done) + autocasts.notes() + reads.notes()
    if skipped["torch.save"]:
        notes.append(f"torch.save: {skipped['torch.save']} call(s) skipped (meta tensors have no values to save)")
    return notes


__all__ = ["ScriptCommand", "run_script"]
