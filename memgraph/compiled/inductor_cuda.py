"""Inductor's CUDA code, run on meta: what a compiled step allocates on the GPU, from Inductor's own decisions.

AOTAutograd runs on meta (memgraph/compiled/aot_graphs.py: Inductor's decompositions, PyTorch's partitioner; on
fake CUDA tensors a CPU build aborts in autograd, which needs a CUDA device guard). Each partitioned graph, forward
and backward, then goes to Inductor as on a GPU (``compile_fx_inner``, as Inductor's own fw/bw compilers call it):
its device arguments made ``cuda:0`` and its inputs fake CUDA tensors, so Inductor's lowering, scheduling, fusion
and buffer reuse decide for CUDA, with the --gpu's compute capability. Inductor believes Triton and a GPU are
there while it compiles (private_api.inductor_cuda_without_gpu): Triton kernels are generated as source and never
compiled. The Python wrapper it generates then runs with the trace's meta tensors, as the cpu target's does
(memgraph/compiled/inductor_cpu.py): each ``empty_strided_cuda`` buffer is a meta tensor the recorder sees born
and freed (the wrapper's ``del``), extern kernels (``mm``, attention, ...) run as meta ATen ops, Triton kernels
are stubs that only write into those buffers.

Not modelled: max-autotune's choice between Triton templates and extern matmuls (it benchmarks on the device;
the extern kernels run here, same output buffers), the compile-time spike of the first step.
"""

from __future__ import annotations

import contextlib
import types
import weakref

import torch

from memgraph.compiled.graphs import generated_call, graph_on, unfused_peak
from memgraph.private_api import (compile_internals, disable_current_modes, inductor_cuda_without_gpu,
                                  inductor_joint_partition, torch_function_modes_popped)

_META = torch.device("meta")
_CUDA = torch.device("cuda", 0)


def graph_on_cuda(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with every ``device="meta"`` argument made ``cuda:0``."""
    return graph_on(gm, _CUDA)


def _fake_mode(values):
    """The fake mode of the first fake tensor among ``values`` (None if none is)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return next((v.fake_mode for v in values if isinstance(v, FakeTensor)), None)


def _values_are_cuda(gm: torch.fx.GraphModule) -> bool:
    """Whether every node's tensor value is already a CUDA one."""
    for n in gm.graph.nodes:
        for v in torch.utils._pytree.tree_leaves(n.meta.get("val")):
            if isinstance(v, torch.Tensor) and v.device.type != "cuda":
                return False
    return True


def _values_on_cuda(gm: torch.fx.GraphModule, inputs: list) -> torch.fx.GraphModule:
    """Each node's ``meta["val"]`` (AOTAutograd's meta fake tensors) made anew from the fake CUDA inputs, as Inductor's
    passes read them (torch.fx.passes.fake_tensor_prop, public)."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = _fake_mode(inputs)
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*inputs)
    return gm


def fake_cuda_inputs(example_inputs) -> list:
    """Fake CUDA tensors (in the fake mode of AOTAutograd's meta example inputs) of the same shapes and strides."""
    mode = _fake_mode(example_inputs)
    out = []
    with mode if mode is not None else contextlib.nullcontext():
        for e in example_inputs:
            out.append(torch.empty_strided(e.shape, e.stride(), dtype=e.dtype, device=_CUDA)
                       if isinstance(e, torch.Tensor) else e)
    return out


class _Stub:
    """What the wrapper's ``torch.cuda`` calls reach on meta: device guards and ``set_device`` do nothing."""

    @staticmethod
    def _DeviceGuard(_index):  # noqa: N802 (torch.cuda's name)
        return contextlib.nullcontext()

    @staticmethod
    def set_device(_index) -> None:
        return None


class _TorchOnMeta(types.ModuleType):
    """``torch`` for the wrapper's globals: ``torch.cuda`` the stub above, everything else torch's."""

    def __init__(self):
        super().__init__("torch")
        self.cuda = _Stub

    def __getattr__(self, name):
        return getattr(torch, name)


_TORCH_ON_META = _TorchOnMeta()


def _meta_device(*_args, **_kwargs) -> torch.device:
    return _META


class _Held:
    """Bytes of one wrapper call's buffers alive now, and the most at once."""

    def __init__(self):
        self.live = self.peak = 0

    def add(self, t: torch.Tensor, nbytes: int) -> None:
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        weakref.finalize(t, self._drop, nbytes)

    def _drop(self, nbytes: int) -> None:
        self.live -= nbytes


class InductorCudaCompiler:
    """``fw_compiler`` / ``bw_compiler`` of memgraph's AOTAutograd: Inductor for CUDA, its wrapper run on meta.

    Counts what the wrappers allocate (bytes and buffers, all runs) and, per graph, the most bytes its wrapper's
    buffers held at once (``fused_peaks``; a buffer counts from its allocation until the wrapper drops its tensor,
    so views that outlive their base make this low, the unknown's slack high) beside the same graph's peak run node by
    node (``unfused_peaks``, graphs.unfused_peak): the slack of the unfused upper end."""

    def __init__(self, gpu):
        self.gpu = gpu  # --compile-mode is not passed on: max-autotune's choices need the device (module docstring)
        self.allocated_bytes = 0
        self.buffers = 0
        self.unfused_peaks: list[int] = []  # per compiled graph
        self.fused_peaks: list[int] = []
        self._current: _Held | None = None  # the buffers of the wrapper call running now

    def partition(self, joint: torch.fx.GraphModule, joint_inputs, partitioner, **kwargs):
        """Inductor's partition step (its joint-graph passes, then ``partitioner``) on the joint graph made CUDA:
        Inductor's pattern passes skip nodes whose values are meta tensors (torch 2.13 lowering.py
        fallback_node_due_to_unsupported_type), dropout's random ops among them."""
        values = [n.meta.get("val") for n in joint.graph.find_nodes(op="placeholder")]
        inputs = fake_cuda_inputs(values)
        fake_mode = _fake_mode(values)
        # the trace's dispatch and torch function modes off, AOTAutograd's fake mode on (the passes trace replacements
        # in it)
        with disable_current_modes(), torch_function_modes_popped(), fake_mode, inductor_cuda_without_gpu(self.gpu):
            joint = _values_on_cuda(graph_on_cuda(joint), inputs)
            return inductor_joint_partition(joint, joint_inputs, partitioner, fake_mode, **kwargs)

    def forward(self, gm: torch.fx.GraphModule, example_inputs):
        return self._compile(gm, example_inputs, is_backward=False)

    def backward(self, gm: torch.fx.GraphModule, example_inputs):
        return self._compile(gm, example_inputs, is_backward=True)

    def inference(self, gm: torch.fx.GraphModule, example_inputs):
        """A graph without autograd (a compiled optimizer step), compiled as Inductor's inference compiler does."""
        return self._compile(gm, example_inputs, is_backward=False, is_inference=True)

    def _compile(self, gm, example_inputs, is_backward: bool, is_inference: bool = False):
        api = compile_internals()
        graph = len(self.unfused_peaks)
        self.unfused_peaks.append(unfused_peak(gm))
        self.fused_peaks.append(0)
        inputs = fake_cuda_inputs(example_inputs)
        # the trace's dispatch and torch function modes off while Inductor compiles (the backward compiles lazily,
        # inside the traced backward, where the recorder's torch function modes, the shadow values' and the forward
        # emulations', would see each of Inductor's own torch calls): its fake-tensor work is no op of the step
        with disable_current_modes(), torch_function_modes_popped(), inductor_cuda_without_gpu(self.gpu):
            gm = graph_on_cuda(gm)
            if not _values_are_cuda(gm):  # the partitioner's graphs keep the joint graph's (CUDA) values
                gm = _values_on_cuda(gm, inputs)
            out = api.compile_fx_inner(gm, inputs, is_backward=is_backward, is_inference=is_inference)
        if not hasattr(out, "current_callable"):  # a graph without ops: its own forward, nothing allocated
            return out
        call = out.current_callable
        module_globals = generated_call(call).__globals__
        path = module_globals.get("__file__")
        api.PyCodeCache.modules_no_attr.pop(path, None)  # a real compile of the same code loads its own kernels
        out.current_callable = self._on_meta(call, module_globals, graph)
        return out

    def _on_meta(self, call, module_globals: dict, graph: int):
        swapped = {"empty_strided_cuda": self._empty, "torch": _TORCH_ON_META, "device": _meta_device}

        def run(args):
            saved = {name: module_globals.get(name) for name in swapped}
            module_globals.update(swapped)
            outer, self._current = self._current, _Held()
            try:
                return call(args)
            finally:
                module_globals.update(saved)
                self.fused_peaks[graph] = max(self.fused_peaks[graph], self._current.peak)
                self._current = outer

        return run

    def _empty(self, size, stride, dtype):
        t = torch.empty_strided(size, stride, dtype=dtype, device=_META)
        nbytes = t.untyped_storage().nbytes()
        self.allocated_bytes += nbytes
        self.buffers += 1
        if self._current is not None:
            self._current.add(t, nbytes)
        return t

    def slack(self) -> tuple[int, int]:
        """(fused, unfused) peak of the graph whose unfused run would hold the most bytes more than Inductor's code."""
        pairs = list(zip(self.fused_peaks, self.unfused_peaks))
        return max(pairs, key=lambda p: p[1] - p[0], default=(0, 0))
