"""PyTorch's CUDA autocast op policy (torch 2.13), as data.

Source of truth: ``aten/src/ATen/autocast_mode.h`` (shipped in the torch wheel under
``torch/include/ATen/``) defines the op lists as X-macros, and ``aten/src/ATen/autocast_mode.cpp``
registers them for CUDA in ``TORCH_LIBRARY_IMPL(aten, Autocast, m)`` (``Autocast`` is the CUDA
autocast key, ``AutocastCUDA``):

==========================================  =====================  ==========================
macro / registration                         cast policy            :func:`autocast_kind`
==========================================  =====================  ==========================
``AT_FORALL_LOWER_PRECISION_FP``             ``lower_precision_fp``  ``"lower"``
``KERNEL_CUDA(cudnn_convolution[...])``      ``lower_precision_fp``  ``"lower"``
``AT_FORALL_FP32``                           ``fp32``               ``"fp32"``
``AT_FORALL_FP32_SET_OPT_DTYPE``             ``fp32_set_opt_dtype``  ``"fp32"``
``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``  ``fp32_append_dtype``   ``"fp32"``
``AT_FORALL_PROMOTE``                        ``promote``            ``"promote"``
``binary_cross_entropy``                     banned (raises)        ``"none"`` (see BANNED_OPS)
==========================================  =====================  ==========================

The same lists are what the docs page "Automatic Mixed Precision package - torch.amp" prints under
"CUDA Ops that can autocast to float16", "... to float32" and "CUDA Ops that promote to the widest
input type" (the docs use Python-level names such as ``cross_entropy``/``softmin``/``normalize``,
which are composites that reach the listed aten ops).

Notes that matter for memory:

* The lists name ops *at the Autocast dispatch key*, i.e. the first aten op a Python call reaches
  (``F.linear`` -> ``aten::linear``), not the decomposed ops a ``__torch_dispatch__`` tracer sees
  below it (``linear`` -> ``t`` + ``addmm``). Composite ops without an autocast kernel fall through
  and decompose; their pieces are then autocast individually (``cross_entropy_loss`` ->
  ``log_softmax`` (fp32) + ``nll_loss`` (fp32)). That is why ``cross_entropy`` is "none" here.
* ``cat``/``stack``/``index_copy`` are ``promote`` only on **CPU** (``AutocastCPU``); on CUDA they are
  not registered and rely on ordinary type promotion.
* ``fp32_set_opt_dtype`` (softmax, log_softmax, sum, prod, cumsum, cumprod, linalg norms) only forces
  float32 when the call passes no explicit ``dtype``; with one, the op runs unchanged.
* The CUDA autocast dtype defaults to float16 (``autocast_dtype`` table in autocast_mode.cpp);
  ``torch.autocast("cuda", dtype=torch.bfloat16)`` changes it.

Weight-cast cache (``cached_cast`` in autocast_mode.cpp)
-------------------------------------------------------
For a lower-precision op, each floating tensor argument that is not already the target dtype is cast
with ``arg.to(to_type)``. The cast is **cached** (keyed by the source ``TensorImpl*``, value holds a
weakref to the source plus the casted tensor) when all of: the target is the device's lower-precision
dtype, the source is float32, ``requires_grad()``, ``is_leaf()``, ``!is_view()``, the cache is
enabled (``torch.autocast(..., cache_enabled=True)``, the default) and the source is not itself a
cached tensor. In practice: parameters (leaf fp32 tensors requiring grad) -- but not views of a flat
parameter, and not frozen (``requires_grad=False``) weights, which are re-cast on every use.

The cache lives until ``at::autocast::clear_cache()``. ``torch.autocast.__enter__`` calls
``torch.autocast_increment_nesting()``; ``__exit__`` calls ``torch.autocast_decrement_nesting()``
and, when that returns 0 (the outermost autocast region exits), ``torch.clear_autocast_cache()``
(torch/amp/autocast_mode.py). Memory consequence: inside the region every parameter used by a
lower-precision op keeps exactly one fp16/bf16 copy (numel * 2 bytes) from its first use until the
outermost region exits; after exit, the copies that autograd saved for backward (e.g. the weight of
``mm``/``addmm`` needed for grad_input) stay alive until backward frees them, the rest are freed.
If backward runs inside the autocast region, the cache keeps all copies alive through backward.
"""

from __future__ import annotations

import re

import torch

# --- AT_FORALL_LOWER_PRECISION_FP (autocast_mode.h) + CUDA-only cudnn_convolution[_transpose] ---------
# Each entry: (op base name, overloads registered; "" = the default overload).
_LOWER_PRECISION_FP = {
    "_convolution": ("deprecated", ""),
    "conv1d": ("",),
    "conv2d": ("",),
    "conv3d": ("",),
    "conv_tbc": ("",),
    "conv_transpose1d": ("",),
    "conv_transpose2d": ("input",),
    "conv_transpose3d": ("input",),
    "convolution": ("",),
    "prelu": ("",),
    "addmm": ("",),
    "addmv": ("",),
    "addr": ("",),
    "matmul": ("",),
    "einsum": ("",),
    "mm": ("",),
    "mv": ("",),
    "linalg_vecdot": ("",),
    "linear": ("",),
    "addbmm": ("",),
    "baddbmm": ("",),
    "bmm": ("",),
    "chain_matmul": ("",),
    "linalg_multi_dot": ("",),
    "_thnn_fused_lstm_cell": ("",),
    "_thnn_fused_gru_cell": ("",),
    "lstm_cell": ("",),
    "gru_cell": ("",),
    "rnn_tanh_cell": ("",),
    "rnn_relu_cell": ("",),
    "_scaled_dot_product_flash_attention": ("",),
    "scaled_dot_product_attention": ("",),
    # autocast_mode.cpp, CUDA only: KERNEL_CUDA(cudnn_convolution[_transpose], lower_precision_fp)
    "cudnn_convolution": ("",),
    "cudnn_convolution_transpose": ("",),
}

# --- AT_FORALL_FP32 ----------------------------------------------------------------------------------
_FP32 = {
    "acos": ("",),
    "asin": ("",),
    "cosh": ("",),
    "erfinv": ("",),
    "exp": ("",),
    "expm1": ("",),
    "log": ("",),
    "log10": ("",),
    "log2": ("",),
    "log1p": ("",),
    "reciprocal": ("",),
    "rsqrt": ("",),
    "sinh": ("",),
    "tan": ("",),
    "pow": ("Tensor_Scalar", "Tensor_Tensor", "Scalar"),
    "softplus": ("",),
    "layer_norm": ("",),
    "native_layer_norm": ("",),
    "rms_norm": ("",),
    "group_norm": ("",),
    "frobenius_norm": ("dim",),
    "nuclear_norm": ("", "dim"),
    "cosine_similarity": ("",),
    "poisson_nll_loss": ("",),
    "cosine_embedding_loss": ("",),
    "nll_loss": ("",),
    "nll_loss2d": ("",),
    "hinge_embedding_loss": ("",),
    "kl_div": ("",),
    "l1_loss": ("",),
    "smooth_l1_loss": ("",),
    "huber_loss": ("",),
    "mse_loss": ("",),
    "margin_ranking_loss": ("",),
    "multilabel_margin_loss": ("",),
    "soft_margin_loss": ("",),
    "triplet_margin_loss": ("",),
    "multi_margin_loss": ("",),
    "binary_cross_entropy_with_logits": ("",),
    "dist": ("",),
    "pdist": ("",),
    "cdist": ("",),
    "renorm": ("",),
    "logsumexp": ("",),
    "upsample_nearest1d": ("",),
    "_upsample_nearest_exact1d": ("",),
    "upsample_nearest2d": ("",),
    "_upsample_nearest_exact2d": ("",),
    "upsample_nearest3d": ("",),
    "_upsample_nearest_exact3d": ("",),
    "upsample_linear1d": ("",),
    "upsample_bilinear2d": ("",),
    "_upsample_bilinear2d_aa": ("",),
    "upsample_trilinear3d": ("",),
    "upsample_bicubic2d": ("",),
    "_upsample_bicubic2d_aa": ("",),
}
# rms_norm joined AT_FORALL_FP32 in torch 2.12: the autocast_mode.h of the torch 2.11.0 wheel does not list it
# (checked against both wheels' headers; tests/test_autocast_policy.py reads the installed one).
if torch.__version__ < (2, 12):
    del _FP32["rms_norm"]

# --- AT_FORALL_FP32_SET_OPT_DTYPE --------------------------------------------------------------------
_FP32_SET_OPT_DTYPE = {
    "prod": ("", "dim_int"),
    "softmax": ("int",),
    "log_softmax": ("int",),
    "cumprod": ("",),
    "cumsum": ("",),
    "linalg_vector_norm": ("",),
    "linalg_matrix_norm": ("", "str_ord"),
    "sum": ("", "dim_IntList"),
}

# --- AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE (fp32_append_dtype) ------------------------------------
_FP32_APPEND_DTYPE = {
    "norm": ("Scalar", "ScalarOpt_dim"),
}

# --- AT_FORALL_PROMOTE -------------------------------------------------------------------------------
_PROMOTE = {
    "addcdiv": ("",),
    "addcmul": ("",),
    "atan2": ("",),
    "bilinear": ("",),
    "cross": ("",),
    "dot": ("",),
    "vdot": ("",),
    "grid_sampler": ("",),
    "index_put": ("",),
    "tensordot": ("",),
    "scatter_add": ("",),
}

# --- autocast_mode.cpp: m.impl("aten::binary_cross_entropy", binary_cross_entropy_banned) ------------
_BANNED = {"binary_cross_entropy": ("",)}

_POLICY_TABLES = (
    ("lower_precision_fp", _LOWER_PRECISION_FP),
    ("fp32", _FP32),
    ("fp32_set_opt_dtype", _FP32_SET_OPT_DTYPE),
    ("fp32_append_dtype", _FP32_APPEND_DTYPE),
    ("promote", _PROMOTE),
    ("banned", _BANNED),
)
_KIND_OF_POLICY = {
    "lower_precision_fp": "lower",
    "fp32": "fp32",
    "fp32_set_opt_dtype": "fp32",
    "fp32_append_dtype": "fp32",
    "promote": "promote",
    "banned": "none",
}

LOWER_PRECISION_OPS: frozenset[str] = frozenset(_LOWER_PRECISION_FP)
FP32_OPS: frozenset[str] = frozenset(_FP32) | frozenset(_FP32_SET_OPT_DTYPE) | frozenset(_FP32_APPEND_DTYPE)
FP32_SET_OPT_DTYPE_OPS: frozenset[str] = frozenset(_FP32_SET_OPT_DTYPE)
PROMOTE_OPS: frozenset[str] = frozenset(_PROMOTE)
BANNED_OPS: frozenset[str] = frozenset(_BANNED)

# "aten::op" / "aten::op.overload" -> policy, exactly the CUDA autocast kernels torch 2.13 registers.
REGISTERED_OVERLOADS: dict[str, str] = {
    f"aten::{op}{'.' + ov if ov else ''}": policy
    for policy, table in _POLICY_TABLES
    for op, overloads in table.items()
    for ov in overloads
}

_POLICY_OF_BASE = {op: policy for policy, table in _POLICY_TABLES for op in table}

_NAME_RE = re.compile(r"^(?:aten(?:::|\.))?(?P<base>[A-Za-z0-9_]+)(?:\.(?P<overload>[A-Za-z0-9_]+))?$")


def _split(op_name) -> tuple[str, str | None]:
    text = str(op_name).strip()
    m = _NAME_RE.match(text)
    if not m:
        return text, None
    overload = m.group("overload")
    return m.group("base"), (None if overload is None else ("" if overload == "default" else overload))


def autocast_policy(op_name) -> str | None:
    """The CUDA autocast cast policy of an op, or ``None`` if CUDA autocast leaves it alone.

    Returns ``"lower_precision_fp"``, ``"fp32"``, ``"fp32_set_opt_dtype"``, ``"fp32_append_dtype"``,
    ``"promote"`` or ``"banned"``. Accepts ``"mm"``, ``"aten::mm"``, ``"aten.mm.default"``,
    ``"aten::softmax.int"`` or an ``OpOverload``/``OpOverloadPacket`` (via ``str``). With an
    overload, only the overloads autocast registers match (``"aten::sum.dim_DimnameList"`` -> None);
    ``"default"`` means the unnamed overload.
    """
    base, overload = _split(op_name)
    policy = _POLICY_OF_BASE.get(base)
    if policy is None or overload is None:
        return policy
    key = f"aten::{base}{'.' + overload if overload else ''}"
    return REGISTERED_OVERLOADS.get(key)


def autocast_kind(op_name) -> str:
    """``"lower"`` (runs in the autocast dtype), ``"fp32"``, ``"promote"`` (widest input type) or
    ``"none"`` (no CUDA autocast kernel, incl. the banned ``binary_cross_entropy``)."""
    policy = autocast_policy(op_name)
    return "none" if policy is None else _KIND_OF_POLICY[policy]
