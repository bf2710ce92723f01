"""``--compile`` in the trace and in a real run: the model wrapped in ``torch.compile``, and what it did."""

from __future__ import annotations

import contextlib

import torch

from memgraph.compiled.aot_graphs import GraphsOnMeta
from memgraph.compiled.graphs import GraphStats
from memgraph.compiled.inductor_cpu import InductorOnMeta
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.private_api import compile_internals, torch_function_modes_popped
from memgraph.units import human_bytes

# torch.compile(mode=...) for each --compile-mode (torch 2.13, torch/__init__.py compile): "default" is mode=None
REAL_MODE = {"default": None, "max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}


class CompiledStep:
    """The model of one trace under ``torch.compile`` with memgraph's backend (memgraph/compiled/__init__.py)."""

    def __init__(self, opts, forward_context=None):
        self.opts = opts
        self.stats = GraphStats()
        budget = opts.activation_memory_budget
        if opts.target == "cpu":
            self.backend = InductorOnMeta(self.stats, opts.compile_mode, budget)
        else:
            self.backend = GraphsOnMeta(self.stats, budget, forward_context)
        self._breaks: dict[str, int] = {}

    @contextlib.contextmanager
    def context(self):
        """Around the traced iterations: fresh Dynamo caches and counters, the backend's settings."""
        api = compile_internals()
        torch._dynamo.reset()
        api.dynamo_counters["graph_break"].clear()
        try:
            with self.backend.context():
                yield self
        finally:
            self._breaks = dict(api.dynamo_counters["graph_break"])
            torch._dynamo.reset()

    def wrap(self, runner):
        """What the loop calls instead of ``runner``: ``torch.compile(runner)`` with memgraph's backend, called with
        the trace's dispatch modes marked ``ignore_compile_internals`` (off while Dynamo and Inductor compile, on
        while the compiled code runs) and its torch function modes popped (traced in by the backend instead)."""
        return _CompiledCall(runner, torch.compile(runner, backend=self.backend, dynamic=False))

    def notes(self) -> list[str]:
        s = self.stats
        target = "Inductor's C++ backend" if self.opts.target == "cpu" else "AOTAutograd's graphs, unfused"
        budget = self.opts.activation_memory_budget
        partitioner = ("min_cut_rematerialization_partition" if budget is None
                       else f"the knapsack partitioner (activation_memory_budget={budget})")
        line = (f"compiled: torch.compile (mode {self.opts.compile_mode}), {s.graphs} graph"
                f"{'s' if s.graphs != 1 else ''}, {sum(self._breaks.values())} graph breaks, {target}, {partitioner}; "
                f"saved for backward: eager {_b(s.eager_saved)}, compiled {_b(s.compiled_saved)}"
                f"{_change(s.eager_saved, s.compiled_saved)}")
        if self.opts.target == "cpu":
            allocated = self.backend.allocated_bytes
            line += (f"; Inductor's fusion: the graphs' {s.forward_nodes + s.backward_nodes} nodes would make "
                     f"{_b(s.unfused_bytes)} per step unfused, its wrappers allocated {self.backend.buffers} buffers, "
                     f"{_b(allocated)} over the {self.opts.iterations} iterations")
        else:
            line += (f"; {s.forward_nodes} forward and {s.backward_nodes} backward nodes, each its own buffer "
                     f"({_b(s.unfused_bytes)} per step): Inductor's CUDA fusion is not run, so the compiled graphs' "
                     "transient memory is the upper end (bounded unknown)")
        notes = [line]
        notes += [f"graph break ({n}x): {reason}" for reason, n in self._breaks.items()]
        notes.append("compile: the first step also compiles (Dynamo, AOTAutograd, Inductor run on the host with "
                     "fake tensors: no device memory)" + ("; max-autotune benchmarks candidate kernels on the device "
                     "in the first step, not modelled" if self.opts.compile_mode != "default" else ""))
        return notes

    def unknowns(self) -> list[BoundedUnknown]:
        if self.opts.target == "cpu" or not self.stats.graphs:
            return []
        return [BoundedUnknown(
            "Inductor's CUDA fusion (not run without a GPU: every graph node its own buffer, the upper end)",
            self.stats.unfused_bytes, self.stats.unfused_bytes,
            "torch 2.13 torch/_inductor/scheduler.py: fusion only removes buffers; memgraph/compiled/aot_graphs.py")]


class _CompiledCall:
    def __init__(self, runner, compiled):
        self._runner, self._compiled = runner, compiled

    def __call__(self, *args, **kwargs):
        for mode in compile_internals().dispatch_modes():
            mode.ignore_compile_internals = _true
        with torch_function_modes_popped(), _meta_constants():
            return self._compiled(*args, **kwargs)

    def __getattr__(self, name):  # zero_grad, parameters, ... of the model
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


def _true() -> bool:
    return True


def compile_for_real(model: torch.nn.Module, opts):
    """``torch.compile(model, mode=...)`` as a user writes it, for ``memgraph measure --compile``; the knapsack
    budget is set while it runs (the partition happens in the first forward)."""
    compiled = torch.compile(model, mode=REAL_MODE[opts.compile_mode])
    if opts.activation_memory_budget is None:
        return compiled
    return _Budgeted(compiled, opts.activation_memory_budget)


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
