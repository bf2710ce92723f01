"""What a recorded step hands the recorder and autograd: which host tensors count, the per-op workspaces, and
the saved-tensor hooks. The tracer (trace/tracer.py) and ``memgraph run`` (script_run/runner.py) record their
steps with these same pieces."""

from __future__ import annotations

import torch

from memgraph.facts.ops.registry import workspace_bytes


def host_type(target: str) -> str | None:
    """The host device whose tensors are device memory too: on the cpu target the device is the host, so tensors
    the model makes on the CPU (LongT5's local-attention masks, AdamW's for-loop ``step`` counters) count; on the
    cuda target host tensors are not device memory."""
    return "cpu" if target == "cpu" else None


def workspace_of(target: str, runtime):
    """The recorder's ``workspace_of``: the op registry's per-target workspaces; on the cuda target it also
    hands the op to the runtime model (a trace/emulate/cuda_library_workspaces.py ``CudaRuntime``, None on the
    cpu target), whose ``on_op`` hook allocates the buffers CUDA kernels take inside the op and the cuBLAS
    workspaces."""
    if runtime is None:
        return lambda op, a, k, out: workspace_bytes(op, target, a, k, out)
    return lambda op, a, k, out: workspace_bytes(op, target, a, k, out) + runtime.workspace_of(op, a, k, out)


def saved_tensor_hooks(rec):
    """``torch.autograd.graph.saved_tensors_hooks`` that mark each tensor autograd saves in ``rec`` (a Recorder)."""

    def pack(t):
        rec.mark_saved(t)
        # Keep an alias without grad_fn, as autograd's own SavedVariable does: a saved *output*
        # kept with its grad_fn makes node -> saved tensor -> grad_fn -> node, a cycle through C++
        # that is never collected, so a branch backward never runs (LLaVA's unused last vision
        # layer) would keep its activations alive where a plain loop frees them after forward.
        return t.detach() if t.grad_fn is not None else t

    return torch.autograd.graph.saved_tensors_hooks(pack, _unpack)


def _unpack(t):
    return t


__all__ = ["host_type", "saved_tensor_hooks", "workspace_of"]
