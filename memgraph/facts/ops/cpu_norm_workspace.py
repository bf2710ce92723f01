"""Batch norm and layer norm on the CPU: the buffers their kernels take for themselves (per-channel statistics,
``alpha``/``beta``, per-thread partial sums, ``expect_contiguous`` copies), from
aten/src/ATen/native/Normalization.cpp and layer_norm.cpp (see facts/ops/cpu_workspace.py)."""

from __future__ import annotations

import math

import torch

from memgraph.facts.ops.cpu_buffers import Timeline, copy_bytes, tensor_bytes
from memgraph.private_api import suggest_memory_format


# --------------------------------------------------------------------------------------------
# normalization: aten/src/ATen/native/Normalization.cpp, cpu/batch_norm_kernel.cpp,
# layer_norm.cpp, cpu/layer_norm_kernel.cpp
# --------------------------------------------------------------------------------------------
def _param_size(x: torch.Tensor) -> int:
    """Statistics dtype: float for reduced-precision inputs ("mixed_type" / opmath), else the input's."""
    return 4 if x.dtype in (torch.bfloat16, torch.float16) else x.element_size()


def _bn_contiguous(t: torch.Tensor) -> bool:
    """Normalization.cpp ``is_contiguous``: contiguous in any of the dense formats."""
    return (t.is_contiguous() or t.is_contiguous(memory_format=torch.channels_last)
            or t.is_contiguous(memory_format=torch.channels_last_3d))


def _bn_channels_last_kernel(x: torch.Tensor) -> bool:
    """batch_norm_kernel.cpp picks its ``*_channels_last_impl`` for channels-last inputs and for
    contiguous ones whose image size is 1 ("NC11 is also channels last")."""
    image = x.numel() // max(1, x.shape[0] * x.shape[1]) if x.dim() >= 2 else 1
    return suggest_memory_format(x) != torch.contiguous_format or image == 1


def _is_contig(t) -> bool:
    return t is None or t.is_contiguous()


def _batch_norm(x, w, b, rm, rv, train: bool) -> list[int]:
    """``batch_norm_cpu`` (Normalization.cpp), the CPU kernel of native_batch_norm and friends.

    1. outputs: ``output`` (empty_like), ``save_mean`` and ``save_var`` (C each when training);
    2. training, ``batch_norm_cpu_update_stats_template`` on a contiguous input: ``_mean`` and
       ``_var_sum`` (C each), plus, in ``batch_norm_cpu_collect_stats_channels_last_impl``, a
       ``{num_threads, C}`` partial-sum buffer; all freed before the transform;
    3. ``batch_norm_cpu_transform_input_template``: on the all-contiguous path the kernel computes
       ``alpha``/``beta`` (C each); on the strided path in eval mode ``1 / at::sqrt(running_var + eps)``
       (two C-sized temporaries).
    """
    c = x.shape[1] if x.dim() > 1 else 1
    ps = _param_size(x)
    all_contig = _bn_contiguous(x) and _is_contig(w) and _is_contig(b) and _is_contig(rm) and _is_contig(rv)
    tl = Timeline()
    tl.alloc(tensor_bytes(x), output=True)
    if train:
        tl.alloc(2 * c * ps, output=True)
        if _bn_contiguous(x):
            stats = tl.alloc(2 * c * ps)
            if _bn_channels_last_kernel(x):
                buf = tl.alloc(torch.get_num_threads() * c * ps)
                tl.free(buf)
            tl.free(stats)
    if all_contig:
        ab = tl.alloc(2 * c * ps)
        tl.free(ab)
    elif not train and rv is not None:
        tmp = tl.alloc(3 * c * ps)  # running_var + eps, sqrt(.), 1 / (.): one full expression
        tl.free(tmp)
    return tl.above_outputs()


def batch_norm(args: tuple, kwargs: dict, out) -> list[int]:
    """native_batch_norm / _native_batch_norm_legit(input, weight, bias, running_mean, running_var,
    training, momentum, eps); the ``no_stats`` overload has no running stats."""
    a = list(args)
    if len(a) > 3 and isinstance(a[3], bool):  # _native_batch_norm_legit.no_stats
        a = a[:3] + [None, None] + a[3:]
    train = a[5] if len(a) > 5 else kwargs.get("training", True)
    return _batch_norm(a[0], a[1], a[2], a[3], a[4], bool(train))


def batch_norm_no_training(args: tuple, kwargs: dict, out) -> list[int]:
    """_native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps)."""
    return _batch_norm(args[0], args[1], args[2], args[3], args[4], False)


def batch_norm_with_update(args: tuple, kwargs: dict, out) -> list[int]:
    """_batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps): training."""
    return _batch_norm(args[0], args[1], args[2], args[3], args[4], True)


def batch_norm_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``batch_norm_backward_cpu_template`` (Normalization.cpp) for native_batch_norm_backward and
    batch_norm_backward (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    train, eps, output_mask[, reserve]).

    1. ``grad_input = at::empty_like(input, input.suggest_memory_format())``, grad_weight, grad_bias;
    2. all-contiguous path: ``grad_input = at::empty_like(input, suggest_memory_format_contig(input))``
       *again* (the first one is freed when it is replaced: grad_input is allocated twice), then the
       kernel; ``batch_norm_cpu_backward_channels_last_impl`` adds a ``{2, num_threads, C}`` buffer
       (and, in eval mode, the C-sized invstd it derives from running_var);
    3. strided path: ``at::sum(grad_out, reduce_dims)`` (C), held to the end.
    """
    go, x = args[0], args[1]
    mask = list(args[9] if len(args) > 9 else kwargs.get("output_mask", (True, True, True)))
    c = x.shape[1] if x.dim() > 1 else 1
    ps = _param_size(x)
    tl = Timeline()
    gi = tl.alloc(tensor_bytes(x) if mask[0] else 0)
    tl.alloc(c * ps * (int(bool(mask[1])) + int(bool(mask[2]))), output=True)
    all_contig = (_bn_contiguous(x) and _bn_contiguous(go)
                  and suggest_memory_format(x) == suggest_memory_format(go))
    if all_contig:
        if mask[0]:
            tl.alloc(tensor_bytes(x), output=True)
            tl.free(gi)
        if _bn_channels_last_kernel(x):
            train = bool(args[7]) if len(args) > 7 else bool(kwargs.get("train", True))
            buf = tl.alloc(2 * torch.get_num_threads() * c * ps + (0 if train else c * ps))
            tl.free(buf)
    else:
        tl.outputs += gi
        tl.alloc(c * go.element_size())
    return tl.above_outputs()


def layer_norm(args: tuple, kwargs: dict, out) -> list[int]:
    """``layer_norm_cpu`` (layer_norm.cpp): native_layer_norm(input, normalized_shape, weight, bias, eps).

    ``X = input.expect_contiguous()`` (and gamma/beta): a copy of a strided input lives through the
    op; then Y, mean and rstd (the outputs)."""
    x = args[0]
    w = args[2] if len(args) > 2 else kwargs.get("weight")
    b = args[3] if len(args) > 3 else kwargs.get("bias")
    extra = copy_bytes(x) + copy_bytes(w) + copy_bytes(b)
    return [extra] if extra else []


def layer_norm_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``layer_norm_backward_cpu`` (layer_norm.cpp) + ``LayerNormBackwardKernelImplInternal``
    (cpu/layer_norm_kernel.cpp): native_layer_norm_backward(grad_out, input, normalized_shape,
    mean, rstd, weight, bias, output_mask).

    1. ``input``/``weight``/``bias`` ``.expect_contiguous()``: copies of strided ones, held;
    2. dX, dgamma, dbeta (outputs);
    3. ``dY.contiguous()`` passed to the kernel (a copy if strided);
    4. with dgamma or dbeta requested: ``buffer.resize_({2, num_threads, N})`` (N = normalized size),
       "an immediate buffer" for the per-thread partial sums.
    """
    go, x, shape = args[0], args[1], args[2]
    w = args[5] if len(args) > 5 else kwargs.get("weight")
    b = args[6] if len(args) > 6 else kwargs.get("bias")
    mask = list(args[7] if len(args) > 7 else kwargs.get("output_mask", (True, True, True)))
    n = math.prod(shape)
    m = x.numel() // max(1, n)
    extra = copy_bytes(x) + copy_bytes(w) + copy_bytes(b)
    if m > 0 and n > 0:
        extra += copy_bytes(go)
        if mask[1] or mask[2]:
            extra += 2 * torch.get_num_threads() * n * x.element_size()
    return [extra] if extra else []
