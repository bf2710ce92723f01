"""Which kernel ``F.scaled_dot_product_attention`` runs on CUDA (what each keeps for backward: the closed
formulas the tests check the trace against, tests/sdpa_saved_bytes.py).

A CPU-only, meta-device trace cannot see this: on ``meta``/CPU, SDPA takes the CPU or math path.
This module re-implements PyTorch's CUDA selection rules as data, so a trace can be re-priced as if
it ran on a given GPU.

Sources (PyTorch, ``aten/src/ATen/native/transformers/``):

* ``cuda/sdp_utils.cpp``: ``select_sdp_backend`` walks ``priority_order`` and returns the first
  backend whose ``can_use_*`` gate passes; each gate is a list of ``check_*`` filters, mirrored one
  by one below (the function names are cited next to every rule).
* ``sdp_utils_cpp.h`` (shipped in the torch 2.13 wheel under ``torch/include``): the shared
  ``check_*`` helpers (``check_for_attn_mask``, ``check_batch_size_and_num_heads_dense``, ...).
* ``ATen/Context.h`` (torch 2.13 wheel): ``sdp_priority_order = {flash, efficient, math, cudnn}``.
* ``attention.cpp``: ``scaled_dot_product_attention`` (padding for flash, mask preprocessing for
  efficient) and ``_scaled_dot_product_attention_math``.
* ``torch/_meta_registrations.py`` (torch 2.13): output shapes of the fused kernels
  (``meta__scaled_dot_product_flash_attention`` etc.).

Version caveats: the ``.cpp`` files were read from a recent stored pytorch/pytorch ``main``; where it
and the torch 2.13 headers disagree, the 2.13 headers win. Known difference: on ``main`` after
pytorch/pytorch PR #191085 (July 2026) the memory-efficient kernel also accepts GQA; the 2.13
``check_batch_size_and_num_heads_dense`` template has no MQA parameter and the 2.13 SDPA docstring
says GQA "works only for Flash_attention and math kernel on CUDA", so 2.13 is modelled without it.

Assumptions (things a shape-level description cannot know): inputs are dense (not nested),
contiguous in the last dim, and 16-byte aligned (true for fresh caching-allocator tensors); an
attention mask is a non-``requires_grad`` boolean ``[B, 1, Lq, Lkv]`` tensor (what transformers 5's
``sdpa_mask`` builds); grad mode is on iff ``requires_grad``; deterministic algorithms are off; the
default backend toggles apply unless ``enabled=`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

# check_flash_attention_hardware_support and check_cudnn_hardware_support in cuda/sdp_utils.cpp
# (torch 2.13): check_sm_version<sm80, sm121>, inclusive on both ends.
FLASH_SM_RANGE = ((8, 0), (12, 1))
CUDNN_SM_RANGE = ((8, 0), (12, 1))

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
LOW_PRECISION = ("float16", "bfloat16")
BACKENDS = ("flash", "efficient", "math", "cudnn")
DEFAULT_PRIORITY = ("flash", "efficient", "math", "cudnn")  # ATen/Context.h sdp_priority_order
CUDNN_PRIORITY = ("cudnn", "flash", "efficient", "math")  # sdp_utils.cpp priority_order() cudnn_order


@dataclass(frozen=True)
class SdpaCall:
    """One SDPA call, as shapes. ``heads``/``kv_heads`` are the query/key-value head counts."""

    dtype: str  # dtype of q/k/v *at the call* (after autocast): "float32" | "float16" | "bfloat16"
    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int  # q and k last dim
    head_dim_v: int  # v last dim
    has_mask: bool  # an explicit attn_mask tensor is passed
    is_causal: bool
    dropout_p: float
    requires_grad: bool  # any of q/k/v requires grad and grad mode is on
    enable_gqa: bool = False

    def __post_init__(self):
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {sorted(DTYPE_BYTES)}")
        for name in ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "head_dim_v"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.dropout_p < 1.0:
            raise ValueError(f"dropout_p must be in [0, 1), got {self.dropout_p}")

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]


# ---------------------------------------------------------------------------------------------
# Shared filters (sdp_utils_cpp.h)


def _heads_ok(call: SdpaCall, supports_gqa: bool) -> bool:
    # check_batch_size_and_num_heads_dense<supports_gqa>: equal head counts, or, only when the backend
    # supports GQA *and* enable_gqa=True, check_grouped_query_attention (Hq % Hkv == 0).
    if call.enable_gqa and supports_gqa:
        return call.kv_heads > 0 and call.heads % call.kv_heads == 0
    return call.heads == call.kv_heads


def _nonzero_seq_ok(call: SdpaCall) -> bool:
    # check_nonzero_sequence_lengths_dense
    return call.q_len > 0 and call.kv_len > 0


def _sm_in(cc: tuple[int, int], lo: tuple[int, int], hi: tuple[int, int]) -> bool:
    # check_sm_version<lower_bound, upper_bound> (inclusive on both ends)
    return lo <= tuple(cc) <= hi


def _low_precision_dtype_ok(call: SdpaCall, cc: tuple[int, int]) -> bool:
    # check_dtypes_low_precision: sm80+ -> {half, bfloat16}; older -> {half}
    return call.dtype in (LOW_PRECISION if cc[0] >= 8 else ("float16",))


# ---------------------------------------------------------------------------------------------
# Per-backend gates (cuda/sdp_utils.cpp)


def can_use_flash(call: SdpaCall, cc: tuple[int, int]) -> bool:
    """Mirrors ``can_use_flash_attention`` (dense inputs)."""
    cc = tuple(cc)
    if call.has_mask:  # check_for_attn_mask: flash takes no attn_mask at all (only is_causal)
        return False
    # check_head_dim_size_flash: q, k, v last dims equal and <= 256 (no multiple-of-8 rule here:
    # scaled_dot_product_attention pads the head dim to a multiple of 8 before calling flash)
    if not (call.head_dim == call.head_dim_v and call.head_dim <= 256):
        return False
    if not _sm_in(cc, *FLASH_SM_RANGE):  # check_flash_attention_hardware_support
        return False
    # check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120: training on sm86-89 and
    # sm120-121 needs head_dim <= 192, or head_dim > 224 without dropout.
    if call.requires_grad and (_sm_in(cc, (8, 6), (8, 9)) or _sm_in(cc, (12, 0), (12, 1))):
        if not (call.head_dim <= 192 or (call.dropout_p == 0.0 and call.head_dim > 224)):
            return False
    # check_flash_causal_non_square_seqlens: is_causal requires seqlen_q == seqlen_k
    if call.is_causal and call.q_len != call.kv_len:
        return False
    if not _low_precision_dtype_ok(call, cc):  # check_dtypes_flash_attention (FA3 off by default)
        return False
    # dense_constraints: check_batch_size_and_num_heads_dense<true /*GQA*/>, nonzero seq lens
    return _heads_ok(call, supports_gqa=True) and _nonzero_seq_ok(call)


def minimum_gemm_alignment(call: SdpaCall, cc: tuple[int, int]) -> int:
    """Mirrors ``minimum_gemm_alignment``: head-dim alignment the efficient kernel needs."""
    is_half = call.dtype in LOW_PRECISION
    use_tc = cc[0] >= 8 or (cc[0] >= 7 and is_half)  # use_tensor_cores
    align = 4 if cc[0] >= 8 else 1
    if use_tc:
        align = max(align, 128 // (16 if is_half else 32))
    return align


def can_use_efficient(call: SdpaCall, cc: tuple[int, int]) -> bool:
    """Mirrors ``can_use_mem_efficient_attention`` (dense inputs, non-ROCm)."""
    cc = tuple(cc)
    if not _sm_in(cc, (5, 0), (12, 1)):  # check_mem_efficient_hardware_support: [sm50, sm121]
        return False
    # check_head_dim_size_mem_efficient: q/k head dim equal (always, by construction here) and q and v
    # head dims divisible by minimum_gemm_alignment; no upper bound on CUDA.
    align = minimum_gemm_alignment(call, cc)
    if not (call.head_dim > 0 and call.head_dim_v > 0 and call.head_dim % align == 0 and call.head_dim_v % align == 0):
        return False
    # dense_constraints: nonzero seq lens; check_batch_size_and_num_heads_dense<false> in torch 2.13
    # (no GQA for the efficient kernel, see module docstring).
    if not (_nonzero_seq_ok(call) and _heads_ok(call, supports_gqa=False)):
        return False
    # dtype: sm80+ {half, float, bfloat16}; older {half, float}
    allowed = ("float16", "float32", "bfloat16") if cc[0] >= 8 else ("float16", "float32")
    return call.dtype in allowed


def can_use_cudnn(call: SdpaCall, cc: tuple[int, int], cudnn_version: int | None) -> bool:
    """Mirrors ``can_use_cudnn_attention``; ``cudnn_version`` as ``torch.backends.cudnn.version()``
    (e.g. 91002 for 9.10.2). ``None`` means no cuDNN attention (not built / unknown)."""
    cc = tuple(cc)
    if cudnn_version is None or cudnn_version < 90000:  # "cuDNN version too old (< v9.0.0)"
        return False
    if call.dropout_p > 0.0 and 91100 < cudnn_version < 91400:  # no dropout on cuDNN 9.11-9.13
        return False
    if not _low_precision_dtype_ok(call, cc):  # check_dtypes_low_precision
        return False
    if not _sm_in(cc, *CUDNN_SM_RANGE):  # check_cudnn_hardware_support
        return False
    if call.dropout_p * 16.0 != int(call.dropout_p * 16.0):  # check_cudnn_dropout: multiples of 1/16
        return False
    # check_batch_size_and_num_heads_dense<true /*GQA*/, false /*requires_same_num_heads*/>
    if not (_nonzero_seq_ok(call) and _heads_ok(call, supports_gqa=True)):
        return False
    # check_cudnn_tensor_shapes
    if call.batch > 65535 or call.heads > 65535:
        return False
    is_sm90_or_sm10x = cc == (9, 0) or cc[0] == 10
    unsupported_sm107 = cc == (10, 7) and cudnn_version <= 92500
    supports_d256 = is_sm90_or_sm10x and not unsupported_sm107 and cudnn_version > 92200
    limit = 128
    if supports_d256:
        limit = 256
    elif is_sm90_or_sm10x and cudnn_version >= 91100 and call.head_dim == 192 and call.head_dim_v == 128:
        limit = 192
    if call.head_dim > limit or call.head_dim_v > limit:
        return False
    if call.head_dim % 8 or call.head_dim_v % 8:
        return False
    if call.kv_len == 1 or (call.dropout_p != 0.0 and call.q_len == 1):
        return False
    # check_cudnn_d256_bprop_head_dim: backward head dims where d256 is on
    if call.requires_grad and supports_d256:
        dims = (call.head_dim, call.head_dim_v)
        if not ((dims[0] <= 128 and dims[1] <= 128) or dims in ((192, 128), (256, 256))):
            return False
    return True


def cudnn_preferred(cc: tuple[int, int], cudnn_version: int | None, cuda_major: int = 12) -> bool:
    """Mirrors ``check_prefer_cudnn_attention``: cuDNN goes *first* in the priority order only on
    sm9x/sm10x with runtime cuDNN > 9.15.0 (and, on CUDA < 13 builds, minor 0 or 3), unless
    ``TORCH_CUDNN_SDPA_DEPRIORITIZED=1``. Otherwise ``Context.h``'s default order puts cuDNN after
    math, so it is never picked automatically."""
    if cudnn_version is None or cudnn_version <= 91500 or cc[0] not in (9, 10):
        return False
    return cuda_major >= 13 or cc[1] in (0, 3)


def choose_sdpa_backend(
    call: SdpaCall,
    cc: tuple[int, int],
    *,
    cudnn_version: int | None = None,
    cuda_major: int = 12,
    enabled: Iterable[str] = BACKENDS,
    priority: Iterable[str] | None = None,
) -> str:
    """The backend ``F.scaled_dot_product_attention`` picks on a CUDA device of capability ``cc``.

    Mirrors ``select_sdp_backend``: walk the priority order, return the first backend whose gate
    passes; math always passes if enabled. ``enabled`` mimics ``torch.nn.attention.sdpa_kernel``;
    ``priority`` overrides the order (``torch._C._set_sdp_priority_order``). With the defaults
    (``cudnn_version=None``) cuDNN attention is never chosen, which is PyTorch's behaviour unless
    ``cudnn_preferred`` holds for the installed cuDNN.
    """
    cc = tuple(cc)
    enabled = set(enabled)
    unknown = enabled - set(BACKENDS)
    if unknown:
        raise ValueError(f"unknown SDPA backend(s) {sorted(unknown)}; known: {BACKENDS}")
    if priority is None:
        priority = CUDNN_PRIORITY if cudnn_preferred(cc, cudnn_version, cuda_major) else DEFAULT_PRIORITY
    for backend in priority:
        if backend not in enabled:
            continue
        if backend == "flash" and can_use_flash(call, cc):
            return "flash"
        if backend == "efficient" and can_use_efficient(call, cc):
            return "efficient"
        if backend == "cudnn" and can_use_cudnn(call, cc, cudnn_version):
            return "cudnn"
        if backend == "math":
            return "math"
    # select_sdp_backend: TORCH_CHECK(!print_debug, "No available kernel. Aborting execution.")
    raise RuntimeError(f"No available SDPA kernel for {call} on sm{cc[0]}{cc[1]} with enabled={sorted(enabled)}")


# ---------------------------------------------------------------------------------------------
# transformers


TRANSFORMERS_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")


def transformers_sdpa_call(call: SdpaCall) -> SdpaCall:
    """The SDPA call transformers' ``sdpa_attention_forward`` (integrations/sdpa_attention.py,
    transformers 5.x) actually makes for a module-level ``call`` (``call.kv_heads`` = the module's
    key/value heads, ``call.is_causal`` = ``module.is_causal``, ``call.has_mask`` = a mask tensor
    reaches the attention function):

    * GQA: ``use_gqa_in_sdpa`` (no mask and k/v head dims equal and <= 256 on CUDA) passes
      ``enable_gqa=True``; otherwise a single query token is packed (``pack_gqa``: heads become the
      kv heads, the groups become query positions); otherwise ``repeat_kv`` copies k/v to all heads.
    * ``is_causal = q_len > 1 and mask is None and module.is_causal``.
    * causal, mask-less prefill with ``kv_len > q_len`` crops k/v to ``q_len``.
    """
    c = call
    if c.kv_heads and c.heads != c.kv_heads:
        n_rep = c.heads // c.kv_heads
        if not c.has_mask and c.head_dim == c.head_dim_v <= 256:
            c = replace(c, enable_gqa=True)
        elif c.q_len == 1:
            c = replace(c, heads=c.kv_heads, q_len=n_rep, enable_gqa=False)
        else:
            c = replace(c, kv_heads=c.heads, enable_gqa=False)
    is_causal = call.q_len > 1 and not c.has_mask and call.is_causal
    c = replace(c, is_causal=is_causal)
    if is_causal and c.q_len > 1 and c.kv_len > c.q_len:
        c = replace(c, kv_len=c.q_len)
    return c


def transformers_attention_backend(attn_implementation: str, call: SdpaCall, cc: tuple[int, int], **sdpa_kwargs) -> str:
    """The kernel a transformers attention layer ends up in.

    ``"eager"`` -> ``"math-eager"``; ``"sdpa"`` -> :func:`choose_sdpa_backend` of
    :func:`transformers_sdpa_call`; ``"flash_attention_2"`` -> ``"flash"`` (the flash-attn package's
    kernels, same saved tensors as PyTorch's flash backend), or ``ValueError`` where flash-attn's
    ``mha_fwd`` would refuse: q/k/v not fp16/bf16 ("FlashAttention only support fp16 and bf16 data
    type"; under autocast the projections already produce fp16/bf16), a GPU older than sm80
    ("FlashAttention only supports Ampere GPUs or newer"), or head_dim > 256.
    """
    cc = tuple(cc)
    if attn_implementation == "eager":
        return "math-eager"
    if attn_implementation == "sdpa":
        return choose_sdpa_backend(transformers_sdpa_call(call), cc, **sdpa_kwargs)
    if attn_implementation == "flash_attention_2":
        if call.dtype not in LOW_PRECISION:
            raise ValueError(
                f"flash_attention_2 needs float16/bfloat16 q/k/v, got {call.dtype} "
                "(flash-attn mha_fwd: 'FlashAttention only support fp16 and bf16 data type'; use autocast or a half-precision model)"
            )
        if cc < (8, 0):
            raise ValueError(
                f"flash_attention_2 needs compute capability >= 8.0, got {cc[0]}.{cc[1]} "
                "(flash-attn mha_fwd: 'FlashAttention only supports Ampere GPUs or newer')"
            )
        if max(call.head_dim, call.head_dim_v) > 256:
            raise ValueError(f"flash_attention_2 supports head_dim <= 256, got {max(call.head_dim, call.head_dim_v)}")
        return "flash"
    raise ValueError(f"unsupported attn_implementation {attn_implementation!r}; expected one of {TRANSFORMERS_IMPLEMENTATIONS}")
