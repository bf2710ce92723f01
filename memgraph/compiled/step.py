"""``--compile`` in the trace and in a real run: the model wrapped in ``torch.compile``, and what it did."""

from __future__ import annotations

import contextlib
import gc
import types

import torch

from memgraph.compiled.aot_graphs import GraphsOnMeta
from memgraph.compiled.eager_fallback import block_forward, modes_popped_for_blocks
from memgraph.compiled.graph_breaks import one_line
from memgraph.compiled.graphs import GraphStats
from memgraph.compiled.inductor_cpu import InductorOnMeta
from memgraph.compiled.inductor_cuda import InductorCudaCompiler
from memgraph.compiled.recompile_limit import recompile_limit_hits
from memgraph.compiled.rng_state import rng_state_ops_recorded
from memgraph.compiled.scope import compile_scope
from memgraph.compiled.strategies import compile_in_engine, compile_per_unit
from memgraph.facts.gpus import get_gpu
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.private_api import (compile_internals, dynamo_guards_see_dispatch_modes, torch_function_modes_popped,
                                  wrap_module_compiled_call)
from memgraph.trace.record.event_log import FREE, StorageRecord
from memgraph.units import human_bytes

# torch.compile(mode=...) for each --compile-mode (torch 2.13, torch/__init__.py compile): "default" is mode=None
REAL_MODE = {"default": None, "max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}


class CompiledStep:
    """The model of one trace under ``torch.compile`` with memgraph's backend (memgraph/compiled/__init__.py)."""

    def __init__(self, opts, forward_context=None):
        self.opts = opts
        self.stats = GraphStats()
        self._garbage: dict[int, tuple[int, StorageRecord]] = {}  # iteration -> (bytes freed, largest storage)
        budget = opts.activation_memory_budget
        if opts.target == "cpu":
            self.backend = InductorOnMeta(self.stats, opts.compile_mode, budget)
        else:
            self.inductor = InductorCudaCompiler(get_gpu(opts.gpu))
            self.backend = GraphsOnMeta(self.stats, budget, forward_context, self.inductor)
        self._breaks: dict[str, int] = {}
        self._limit_hits: list = []  # Dynamo's recompile-limit hits (memgraph/compiled/recompile_limit.py)
        self._recorder_modes: list = []  # the trace's dispatch modes, as the compiled calls found them
        self._block_forward = block_forward()  # every block's forward in a per-block compile (eager_fallback.py)
        self._block_classes: set[str] = set()  # their classes, for the notes

    @contextlib.contextmanager
    def context(self):
        """Around the traced iterations: fresh Dynamo caches and counters, the backend's settings; Dynamo's guards
        built as the recorder's dispatch modes make the calls see them, so the graphs compiled by the first
        iteration serve the later ones (without it every iteration recompiled: private_api)."""
        api = compile_internals()
        torch._dynamo.reset()
        api.dynamo_counters["graph_break"].clear()
        try:
            with self.backend.context(), dynamo_guards_see_dispatch_modes(), _dispatch_modes_not_compiled(), \
                    rng_state_ops_recorded(), recompile_limit_hits() as hits:
                self._limit_hits = hits
                yield self
        finally:
            self._breaks = dict(api.dynamo_counters["graph_break"])
            torch._dynamo.reset()

    @staticmethod
    def modules(module_stack):
        """Module attribution off: its global module hooks would be traced into Dynamo's graphs (guards on their
        state recompile every call) and the real compiled step has none; the compiled graphs' ops are attributed to
        the top level."""
        return contextlib.nullcontext(module_stack)

    def wrap(self, runner):
        """What the loop calls instead of ``runner``: ``torch.compile(runner)`` with memgraph's backend, called with
        the trace's dispatch modes marked ``ignore_compile_internals`` (off while Dynamo and Inductor compile, on
        while the compiled code runs) and its torch function modes popped (traced in by the backend instead)."""
        return _CompiledCall(runner, torch.compile(runner, backend=self.backend, dynamic=False), self.stats)

    def wrap_step(self, step) -> None:
        """``step`` (memgraph/step/build.py Step) as the compiled run has it: the model compiled, and with
        ``--compile-loss`` / ``--compile-optimizer`` the loss function and the optimizer's ``step`` too
        (memgraph/compiled/scope.py), each with memgraph's backend."""
        if compile_per_unit(step, self._compile_unit):  # FSDP2: each block (memgraph/compiled/strategies.py)
            step.runner = _Counted(step.runner, self.stats)
        elif compile_in_engine(step, self._compile_engine):  # DeepSpeed: its engine's module, after initialize
            step.runner = _Counted(step.runner, self.stats)
        else:
            step.runner = self.wrap(step.runner)
        compile_scope(step, lambda fn: _CompiledCall(fn, torch.compile(fn, backend=self.backend, dynamic=False),
                                                     self.stats, counts=False, modes=self._recorder_modes),
                      self._recorder_modes)

    def _compile_unit(self, unit) -> None:
        """``unit.compile(backend=...)`` as torchtune writes it, its compiled call made through :class:`_CompiledCall`
        (not counted: the runner's call counts the step)."""
        unit.forward = types.MethodType(self._block_forward, unit)  # for an eager fallback (eager_fallback.py)
        self._block_classes.add(type(unit).__name__.removeprefix("FSDP"))
        unit.compile(backend=self.backend, dynamic=False)
        wrap_module_compiled_call(unit, lambda c: _CompiledCall(unit, c, self.stats, counts=False))

    def _compile_engine(self, engine) -> None:
        """``engine.compile(backend=...)`` as accelerate calls it (strategies.py compile_in_engine), its module's
        compiled call made through :class:`_CompiledCall` (not counted: the runner's call counts the step)."""
        engine.compile(backend=self.backend, compile_kwargs={"dynamic": False})
        wrap_module_compiled_call(engine.module, lambda c: _CompiledCall(engine.module, c, self.stats, counts=False))

    def collect_garbage(self, log, iteration: int) -> None:
        """``gc.collect()`` after ``iteration`` with the recorder on: the storages Dynamo's tracing state kept.

        Dynamo leaves its tracing state (OutputGraph, InstructionTranslators and the values they hold, among them
        the step's own tensors at a graph break) as cyclic garbage, freed by Python's next full collection,
        whose time depends on the process's history: on tiny GPT-2 (2 graph breaks, torch 2.13.0) it kept the first
        compiled call's outputs, the 32x1000 float32 logits among them, 160,772 B, alive into iteration 2 of the
        real step (measured) and of the trace. The
        measurement collects at the same place (measure/real_step.py collect_compile_garbage); the freed bytes
        are stated (notes)."""
        start = len(log.events)
        gc.collect()  # works with the collector paused (memgraph/collector.py); frozen objects are not garbage
        storages = [log.storages[sid] for kind, sid in log.events[start:] if kind == FREE]
        if storages:
            self._garbage[iteration] = (sum(s.nbytes for s in storages), max(storages, key=lambda s: s.nbytes))

    def notes(self) -> list[str]:
        s = self.stats
        graphs, eager, saved = len(s.step()), s.total("eager_saved"), s.total("compiled_saved")
        nodes, unfused = s.total("forward_nodes") + s.total("backward_nodes"), s.total("unfused_bytes")
        target = "Inductor's C++ backend" if self.opts.target == "cpu" else "Inductor's CUDA code (Triton not run)"
        budget = self.opts.activation_memory_budget
        partitioner = ("min_cut_rematerialization_partition" if budget is None
                       else f"the knapsack partitioner (activation_memory_budget={budget})")
        also = [part for part, on in (("loss", self.opts.compile_loss), ("optimizer step", self.opts.compile_optimizer))
                if on]
        line = (f"compiled: torch.compile (mode {self.opts.compile_mode}"
                f"{'; the model, ' + ' and '.join(['the ' + a for a in also]) if also else ''}), "
                f"{graphs} graph{'s' if graphs != 1 else ''}"
                f", {sum(self._breaks.values())} graph breaks, {target}, {partitioner}; saved activations: eager "
                f"{_b(eager)}, compiled {_b(saved)}{_change(eager, saved)}")
        inductor = self.backend if self.opts.target == "cpu" else self.inductor
        line += (f"; fusion: the graphs' {nodes} nodes would allocate {_b(unfused)} per step unfused, Inductor's "
                 f"code allocated {_b(inductor.allocated_bytes // self.opts.iterations)} per step "
                 f"({inductor.buffers // self.opts.iterations} buffers)")
        notes = [line]
        notes += [f"graph break ({n}x): {one_line(reason)}" for reason, n in self._breaks.items()]
        blocks = " and ".join(sorted(self._block_classes)) or None
        notes += [hit.note(blocks) for hit in self._limit_hits]
        for iteration, (freed, largest) in self._garbage.items():
            shape = "x".join(map(str, largest.shape)) or "scalar"
            notes.append(f"compile: Python's garbage collector freed {_b(freed)} that Dynamo's tracing state kept "
                         f"after iteration {iteration} (largest: {shape} {largest.dtype} {largest.phase} tensor, "
                         f"{_b(largest.nbytes)}); the steady state is after that collection (measured the same "
                         f"way): until a full collection runs, the next iteration's peak is higher by what that "
                         f"state holds, {_b(freed)} in this trace; in a real run it depends on when Python's "
                         f"automatic collection ran during the iteration (gc.collect() after the first step frees "
                         f"it)")
        notes.append("compile: the first step also compiles (Dynamo, AOTAutograd, Inductor run on the host with "
                     "fake tensors: no device memory)" + ("; max-autotune benchmarks candidate kernels on the device "
                     "in the first step, not modelled" if self.opts.compile_mode != "default" else ""))
        return notes

    def unknowns(self) -> list[BoundedUnknown]:
        """cuda target: Inductor's CUDA decisions are the expected figure (its Triton kernels never run, its
        heuristics read the --gpu's properties, max-autotune's choices are not made); no fusion at all is the upper
        end: the graph whose node-by-node run would hold the most bytes more than Inductor's code held."""
        if self.opts.target == "cpu" or not self.stats.partitions:
            return []
        fused, unfused = self.inductor.slack()
        return [BoundedUnknown(
            "Inductor's CUDA fusion (decided as on the GPU; unfused, every graph node its own buffer, the upper end)",
            fused, max(fused, unfused),
            "torch 2.13 torch/_inductor/scheduler.py (fusion), codegen/wrapper.py (buffer reuse); "
            "memgraph/compiled/inductor_cuda.py, graphs.unfused_peak")]


class _CompiledCall:
    """``counts``: each call is a new call of the step (the model's); the loss's and the optimizer step's graphs are
    counted with the model call of the same iteration (GraphStats.step)."""

    def __init__(self, runner, compiled, stats: GraphStats, counts: bool = True, modes: list | None = None):
        self._runner, self._compiled, self._stats, self._counts = runner, compiled, stats, counts
        self._modes = modes  # filled with the trace's dispatch modes at each call (scope.py _init_group_recorded)

    def __call__(self, *args, **kwargs):
        self._stats.call += self._counts
        modes = compile_internals().dispatch_modes()
        if self._modes is not None:
            self._modes[:] = modes
        for mode in modes:
            mode.ignore_compile_internals = _true
        with torch_function_modes_popped() as popped, modes_popped_for_blocks(popped), _meta_constants():
            return self._compiled(*args, **kwargs)

    def __getattr__(self, name):  # zero_grad, parameters, ... of the model
        return getattr(self._runner, name)


class _Counted:
    """The runner of a per-block compile (its blocks compiled, itself eager): each call is a new call of the step."""

    def __init__(self, runner, stats: GraphStats):
        self._runner, self._stats = runner, stats

    def __call__(self, *args, **kwargs):
        self._stats.call += 1
        return self._runner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._runner, name)


_TORCH_TENSOR = torch.tensor


def _tensor(data, *args, device=None, **kwargs):
    """``torch.tensor`` for the compiled call: Dynamo leaves ``torch.tensor(data, device="meta")`` a real meta
    tensor among its fake ones (torch 2.13: "Please convert all Tensors to FakeTensors first", e.g. transformers'
    DynamicLayer starting its cache with ``torch.tensor([], device=...)``); an empty meta tensor of the same shape
    and dtype instead (a meta tensor has no values either way)."""
    if device is not None and torch.device(device).type == "meta":
        kwargs.pop("requires_grad", None)
        like = _TORCH_TENSOR(data, *args, **kwargs)
        return torch.empty(like.shape, dtype=like.dtype, device="meta")
    return _TORCH_TENSOR(data, *args, device=device, **kwargs)


@contextlib.contextmanager
def _meta_constants():
    torch.tensor = _tensor
    try:
        yield
    finally:
        torch.tensor = _TORCH_TENSOR


@contextlib.contextmanager
def _dispatch_modes_not_compiled():
    """The trace's dispatch modes' ``__torch_dispatch__`` run with Dynamo off (``torch._dynamo.disable``, public):
    marked ``ignore_compile_internals``, their frames, entered from the eager code between graph breaks, were
    otherwise compiled by Dynamo like the model's (graph breaks and recompilations a real run does not have)."""
    classes = {type(m) for m in compile_internals().dispatch_modes()}
    originals = {c: c.__dict__.get("__torch_dispatch__") for c in classes}
    for c, f in originals.items():
        if f is not None:
            c.__torch_dispatch__ = torch._dynamo.disable(f)
    try:
        yield
    finally:
        for c, f in originals.items():
            if f is not None:
                c.__torch_dispatch__ = f


def _true() -> bool:
    return True


def compile_step_for_real(step) -> None:
    """``step`` compiled as a user compiles it (``memgraph measure --compile``): the model, and with
    ``--compile-loss`` / ``--compile-optimizer`` the loss function and the optimizer's ``step`` (scope.py)."""
    opts = step.options
    if not (compile_per_unit(step, lambda unit: _compile_unit_for_real(unit, opts))
            or compile_in_engine(step, lambda engine: _compile_engine_for_real(engine, opts))):
        step.runner = compile_for_real(step.runner, opts)
    compile_scope(step, lambda fn: compile_for_real(fn, opts))


def compile_for_real(model: torch.nn.Module, opts):
    """``torch.compile(model, mode=...)`` as a user writes it, for ``memgraph measure --compile``; the knapsack
    budget is set while it runs (the partition happens in the first forward)."""
    compiled = torch.compile(model, mode=REAL_MODE[opts.compile_mode])
    if opts.activation_memory_budget is None:
        return compiled
    return _Budgeted(compiled, opts.activation_memory_budget)


def _compile_unit_for_real(unit: torch.nn.Module, opts) -> None:
    """``unit.compile(mode=...)`` as torchtune's compile_model writes it (memgraph/compiled/strategies.py)."""
    unit.compile(mode=REAL_MODE[opts.compile_mode])
    if opts.activation_memory_budget is not None:
        wrap_module_compiled_call(unit, lambda c: _Budgeted(c, opts.activation_memory_budget))


def _compile_engine_for_real(engine, opts) -> None:
    """``engine.compile(backend="inductor", compile_kwargs={"mode": ...})`` as accelerate calls it with the
    Trainer's defaults (accelerate 1.15 ``TorchDynamoPlugin.to_kwargs``: backend and mode)."""
    engine.compile(backend="inductor", compile_kwargs={"mode": REAL_MODE[opts.compile_mode]})
    if opts.activation_memory_budget is not None:
        wrap_module_compiled_call(engine.module, lambda c: _Budgeted(c, opts.activation_memory_budget))


class _Budgeted:
    def __init__(self, compiled, budget: float):
        self._compiled, self._budget = compiled, budget

    def __call__(self, *args, **kwargs):
        with compile_internals().functorch_config.patch(activation_memory_budget=self._budget):
            return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def _b(n: int) -> str:
    return f"{human_bytes(n)} ({n:,} B)"


def _change(before: int, after: int) -> str:
    return f" ({(after - before) / before:+.1%})" if before else ""
