"""Inductor's CPU code, run on meta: what a compiled step allocates on the CPU, from Inductor's own decisions.

A Dynamo graph of a meta model is compiled by Inductor for the CPU: the graph's device arguments become ``cpu``
and its inputs fake CPU tensors, so AOTAutograd, Inductor's decompositions, joint-graph passes, partitioner,
fusion and buffer reuse decide exactly as for real CPU tensors. The generated wrapper (Python, torch 2.13's
default ``cpp_wrapper=False``) then runs with the meta tensors of the trace: each buffer it allocates through its
``empty_strided_cpu`` global is made a meta tensor (the recorder sees it born, and freed at the wrapper's
``del``), extern kernels (``mm``, SDPA, ...) run as meta ATen ops, and Inductor's C++ kernels, which only write
into those buffers, are stubs: g++ never runs.
"""

from __future__ import annotations

import contextlib
import warnings

import torch

from memgraph.compiled.graphs import GraphStats, generated_call, graph_on
from memgraph.compiled.lifted import WithLifted, lift_tensor_attributes
from memgraph.private_api import compile_internals, compile_log_text_skipped

_KERNEL_PREFIX = "cpp_"  # Inductor names its C++ kernels cpp_fused_*, cpp_* (torch/_inductor/codegen/cpp.py)
_META = torch.device("meta")
_CPU = torch.device("cpu")


def _stub_kernel(*_args, **_kwargs) -> None:
    """A C++ kernel, skipped: it writes into buffers the wrapper allocated."""


def _stub_binding(_self, _argtypes, _source):
    return _stub_kernel


def _partitioner(stats: GraphStats, budget: float | None):
    """``torch._inductor.config.custom_partitioner_fn`` (a public extension point, torch/_inductor/
    custom_graph_pass.py): Inductor's own partitioner, counted (GraphStats)."""
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    class Partitioner(CustomPartitionerFn):
        def __call__(self, gm, joint_inputs, **kwargs):
            return stats.partition(gm, joint_inputs, budget, **kwargs)

        def uuid(self):
            return None  # never cached: caches are off while memgraph compiles

    return Partitioner()


def graph_on_cpu(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with every ``device="meta"`` argument made ``cpu``."""
    return graph_on(gm, _CPU)


def fake_cpu_inputs(example_inputs) -> list:
    """Fake CPU tensors with the shapes, strides, dtypes and requires_grad of Dynamo's meta example inputs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    out = []
    with FakeTensorMode():
        for e in example_inputs:
            if not isinstance(e, torch.Tensor):
                out.append(e)
                continue
            t = torch.empty_strided(e.shape, e.stride(), dtype=e.dtype, device="cpu")
            out.append(torch.nn.Parameter(t, e.requires_grad) if isinstance(e, torch.nn.Parameter)
                       else t.requires_grad_(e.requires_grad))
    return out


class InductorOnMeta:
    """Compiles one Dynamo graph with Inductor for the CPU and returns what runs it on meta."""

    def __init__(self, stats: GraphStats, mode: str, budget: float | None):
        self.stats, self.mode, self.budget = stats, mode, budget
        self.allocated_bytes = 0  # bytes the wrappers allocated, all runs
        self.buffers = 0

    def context(self) -> contextlib.ExitStack:
        """The settings of every compile of the trace, the lazily compiled backward graphs' included: memgraph's
        partitioner wrapper, one compile thread, no caches, C++ kernels not built, no log text."""
        api = compile_internals()
        config_patches = {"max_autotune": True} if self.mode == "max-autotune-no-cudagraphs" else {}
        config_patches.update(custom_partitioner_fn=_partitioner(self.stats, self.budget), compile_threads=1)
        stack = contextlib.ExitStack()
        for ctx in (no_compile_caches(), compile_log_text_skipped(), _budget(api, self.budget), api.inductor_config.patch(config_patches),
                    _patched(api.AsyncCompile, "cpp_pybinding", _stub_binding)):
            stack.enter_context(ctx)
        return stack

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        api = compile_internals()
        gm, lifted = lift_tensor_attributes(gm)  # a compiled optimizer step's state (lifted.py)
        compiled = api.compile_fx(graph_on_cpu(gm), fake_cpu_inputs([*example_inputs, *lifted]), inner_compile=self._inner)
        return WithLifted(compiled, lifted) if lifted else compiled

    def _inner(self, *args, **kwargs):
        api = compile_internals()
        if kwargs.get("is_inference"):  # no partition to count it (compile_fx's inference compiler)
            self.stats.inference(args[0])
        out = api.compile_fx_inner(*args, **kwargs)
        if not hasattr(out, "current_callable"):  # a graph without ops (torch 2.13 compile_fx.py, count_calls ==
            return out  # 0: its own forward, boxed): it returns its inputs, nothing to run on meta
        call = out.current_callable
        module_globals = generated_call(call).__globals__
        path = module_globals.get("__file__")
        api.PyCodeCache.modules_no_attr.pop(path, None)  # a real compile of the same code loads its own kernels
        out.current_callable = self._on_meta(call, module_globals)
        return out

    def _on_meta(self, call, module_globals: dict):
        swapped = {name: _stub_kernel for name in module_globals if name.startswith(_KERNEL_PREFIX)}
        swapped["empty_strided_cpu"] = self._empty

        def run(args):
            saved = {name: module_globals[name] for name in swapped}
            module_globals.update(swapped)
            try:
                return call(args)
            finally:
                module_globals.update(saved)

        return run

    def _empty(self, size, stride, dtype):
        t = torch.empty_strided(size, stride, dtype=dtype, device=_META)
        self.allocated_bytes += t.untyped_storage().nbytes()
        self.buffers += 1
        return t


@contextlib.contextmanager
def _patched(owner, name: str, value):
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def no_compile_caches():
    """Inductor's on-disk caches off while memgraph compiles (torch.compiler.config.force_disable_caches), and the
    warning that setting gives each process (torch 2.13 torch/_dynamo/pgo.py: "dynamo_pgo force disabled by
    torch.compiler.config.force_disable_caches") not shown: memgraph's choice, nothing for the user to act on."""
    with torch.compiler.config.patch(force_disable_caches=True), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        yield


def _budget(api, budget: float | None):
    if budget is None:
        return contextlib.nullcontext()
    return api.functorch_config.patch(activation_memory_budget=budget)
