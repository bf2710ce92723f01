"""Memory CUDA libraries take through the caching allocator during a training step.

cuBLAS: PyTorch gives every (cuBLAS handle, stream) pair a workspace from the caching allocator
at its first GEMM and keeps it (``getNewWorkspace`` / ``cublas_handle_stream_to_workspace`` in
aten/src/ATen/cuda/CublasHandlePool.cpp), and a separate cuBLASLt workspace the same way
(``getNewCUDABlasLtWorkspace``). Handles are per thread, and autograd runs the backward of CUDA
tensors on its own device thread, so a step holds one pair for the forward/optimizer thread and
one for the backward thread. Sizes come from :mod:`memgraph.facts.gpus` (32 MiB cuBLAS on
sm90, 8 MiB + 128 KiB elsewhere; 1 MiB cuBLASLt). Both count in ``max_memory_allocated``.
Whether both threads and both workspaces really appear is to be confirmed by GPU measurements.

Kernel buffers: :class:`CudaKernelBuffers` gives the recorder, op by op, the buffers a CUDA kernel
allocates and frees inside the op (cuDNN convolution workspaces, operand copies cuBLAS needs, fused
attention backward buffers: :mod:`memgraph.facts.ops.cuda_workspace`), and collects the bounded unknowns
they come with, once per mechanism with its largest slack, for ``Trace.unknowns``.
"""

from __future__ import annotations

import torch

from memgraph.facts.gpus import GpuSpec
from memgraph.facts.ops.registry import CudaContext, cuda_kernel_buffers, packet
from memgraph.facts.unknowns import BoundedUnknown

# ATen ops that run a cuBLAS GEMM on CUDA (ops that decompose into these, such as linear,
# matmul and einsum, reach the recorder as these).
CUBLAS_OPS = frozenset({
    "aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.addbmm", "aten.addmv", "aten.mv",
    "aten.dot", "aten.vdot", "aten._addmm_activation", "aten._int_mm", "aten._scaled_mm",
})


class CudaLibraryWorkspaces:
    """Recorder ``on_op`` hook: allocate each thread's cuBLAS/cuBLASLt workspaces at its first GEMM."""

    def __init__(self, gpu: GpuSpec):
        self.sizes = (("cuBLAS workspace", gpu.cublas_workspace_bytes),
                      ("cuBLASLt workspace", gpu.cublaslt_workspace_bytes))
        self.threads_done: set[str] = set()

    def __call__(self, rec, info) -> None:
        if packet(info.op) not in CUBLAS_OPS:
            return
        thread = "autograd thread" if info.phase == "backward" else "main thread"
        if thread in self.threads_done:
            return
        self.threads_done.add(thread)
        for name, nbytes in self.sizes:
            if nbytes:
                rec.persistent(nbytes, f"{name} ({thread})", info.module, info.index)


class CudaKernelBuffers:
    """The buffers CUDA kernels allocate inside an op, in two recorder hooks.

    :meth:`workspace_of` (the recorder's ``workspace_of``, called with the op's arguments right after its
    outputs are recorded) asks the op registry and keeps the answer; :meth:`allocate` (called from the
    ``on_op`` hook that follows for the same op) allocates each phase's named blocks, runs ``inside`` (the
    cuBLAS workspace hook: a GEMM's first call per thread takes its workspace while the copied operands are
    alive), and frees them.
    """

    def __init__(self, gpu: GpuSpec):
        # the process's cuDNN TF32 toggle, read once per trace as the SDPA backend toggles are
        self.ctx = CudaContext(tuple(gpu.compute_capability), bool(torch.backends.cudnn.allow_tf32))
        self._unknowns: dict[str, BoundedUnknown] = {}
        self._pending: list[dict[str, int]] = []

    def workspace_of(self, op: str, args: tuple, kwargs: dict, out) -> list[int]:
        buffers = cuda_kernel_buffers(op, self.ctx, args, kwargs, out)
        for u in buffers.unknowns:
            kept = self._unknowns.get(u.name)
            if kept is None or u.slack_bytes > kept.slack_bytes:
                self._unknowns[u.name] = u
        self._pending = buffers.phases
        return []  # allocated by allocate(), as named blocks

    def allocate(self, rec, info, inside=None) -> None:
        phases, self._pending = self._pending, []
        for i, phase in enumerate(phases):
            sids = [rec.persistent(nbytes, name, info.module, info.index) for name, nbytes in phase.items()]
            if i == 0 and inside is not None:
                inside(rec, info)
                inside = None
            for sid in sids:
                rec.log.free(sid)
        if inside is not None:
            inside(rec, info)

    def unknowns(self) -> list[BoundedUnknown]:
        """One bounded unknown per mechanism met, the call with the largest slack, by name."""
        return [self._unknowns[name] for name in sorted(self._unknowns)]


class CudaRuntime:
    """The cuda target's runtime allocations: library workspaces and kernel buffers (recorder hooks)."""

    def __init__(self, gpu: GpuSpec):
        self.libraries = CudaLibraryWorkspaces(gpu)
        self.kernels = CudaKernelBuffers(gpu)

    def workspace_of(self, op: str, args: tuple, kwargs: dict, out) -> list[int]:
        return self.kernels.workspace_of(op, args, kwargs, out)

    def __call__(self, rec, info) -> None:  # on_op
        self.kernels.allocate(rec, info, inside=self.libraries)
