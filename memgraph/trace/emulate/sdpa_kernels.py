"""Run the attention (and dropout) kernels the target device would pick, on ``meta``.

On ``meta``, ``F.scaled_dot_product_attention`` always takes the math path
(``_scaled_dot_product_attention_math``: materialises the B x H x Lq x Lkv scores and softmax and
saves them for backward), because the kernel choice (``_fused_sdp_choice_stub``) has no meta
implementation. :class:`KernelMode` is a ``TorchFunctionMode`` that intercepts the call and makes
the one a real device makes, mirroring ``scaled_dot_product_attention`` in
aten/src/ATen/native/transformers/attention.cpp (torch 2.13):

``cuda`` target
    The backend is :func:`memgraph.facts.sdpa_backend.choose_sdpa_backend` for the target GPU's compute
    capability (``flash`` > ``efficient`` > ``math``; cuDNN attention only when asked for), with the
    global ``torch.backends.cuda.*_sdp_enabled()`` toggles and priority order (``sdpa_kernel``)
    honoured. Fused kernels also need 4-d dense inputs with a unit last-dim stride; otherwise math.

    * flash: q/k/v padded to a head dim multiple of 8 (``pad_last_dim<8>`` = ``constant_pad_nd``),
      ``aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, scale=og_scale)``
      (no mask; GQA with ``enable_gqa`` goes to the kernel with the smaller k/v as on CUDA: flash
      supports it natively), output sliced back (``post_process_flash_output``). Saved for
      backward: q, k, v, out, the float32 logsumexp [B, H, Lq], the philox seed/offset.
    * efficient: a boolean mask becomes an additive mask in q's dtype
      (``convert_boolean_attn_mask``: ``where(mask, 0, scalar_tensor(-inf))``); ``preprocess_mask``
      pads it when its strides are not multiples of 8 (``pad_bias<8>``) and expands it to
      [B, H, Lq, Lkv]; ``aten._scaled_dot_product_efficient_attention(q, k, v, bias,
      compute_log_sumexp=requires grad, ...)``. Saved: q, k, v, bias, out, logsumexp [B, H, ceil32(Lq)].
    * cudnn: ``aten._scaled_dot_product_cudnn_attention`` (never chosen unless a cuDNN version that
      PyTorch prefers is configured; see ``choose_sdpa_backend``).
    * math: the original call, which is what meta runs already (incl. enable_gqa's
      ``repeat_interleave`` and the float32 upcast of fp16/bf16 inputs).

``cpu`` target
    The backend is what this PyTorch build picks for CPU tensors of the same shapes, dtypes and
    arguments: ``aten._fused_sdp_choice`` is asked on zero-stride CPU stand-ins (no data). Flash
    (``_scaled_dot_product_flash_attention_for_cpu``, which also takes a mask and GQA) saves only
    out and a float32 logsumexp; otherwise math.

Dropout (``cuda`` target only): ``at::dropout`` uses the fused ``native_dropout`` kernel on CUDA
(``is_fused_kernel_acceptable``: CUDA, 0 < p < 1, non-empty), which saves a **bool** mask for
backward; on CPU/meta it multiplies by a noise tensor of the input's dtype (4 bytes per element in
float32). ``torch.dropout`` (what ``F.dropout``/``nn.Dropout`` call, not in place) is therefore run
as ``aten.native_dropout`` on the cuda target.

The backward kernels' internal buffers (flash's float32 ``dq_accum``/``softmax_d`` and, with GQA, the
expanded dk/dv; the efficient kernel's ``delta`` and staging workspace) are the op registry's cuda
entries (memgraph/facts/ops/cuda_workspace.py), recorded at the backward op; the CPU flash kernel's
per-thread buffers are the cpu entries of memgraph/facts/ops/cpu_attention.py. Not modelled: the
efficient kernel's philox seed/offset are CPU tensors on CUDA but
two 8-byte meta tensors here; math with dropout on the cuda target keeps meta's dropout.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import torch

from memgraph.errors import MemgraphError
from memgraph.facts.sdpa_backend import (
    DTYPE_BYTES,
    SdpaCall,
    can_use_flash,
    choose_sdpa_backend,
    transformers_attention_backend,
)
from memgraph.notes import Note
from memgraph.private_api import DROPOUT_BINDING as DROPOUT
from memgraph.private_api import SDPA_BINDING as SDPA
from memgraph.private_api import (
    DisableTorchFunction,
    disable_current_modes,
    fused_sdp_choice,
    sdp_priority_order,
)
from memgraph.trace.record.transparent_mode import PASS, TransparentFunctionMode

_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")


@dataclass
class KernelStats:
    """Which kernels the emulation ran, for the trace notes."""

    target: str
    where: str  # "sm90" / "cpu"
    sdpa: Counter = field(default_factory=Counter)  # (backend, dtype, head_dim, detail) -> calls
    dropout: int = 0

    def describe(self, iterations: int, compiled: bool = False) -> list[str]:
        """One line per kernel; under ``--compile`` the emulation sees the calls AOTAutograd traces into the
        compiled graphs (once per compilation, not per iteration), and the count says so."""
        notes = []
        over = "traced into the compiled graphs" if compiled else f"over {iterations} iterations"
        for (backend, dtype, head_dim, detail), n in sorted(self.sdpa.items()):
            extra = f", {detail}" if detail else ""
            notes.append(Note("SDPA: {backend} kernel ({dtype}, head_dim {head_dim}, {where}{extra}) x {calls} calls "
                              "{over}", per_layer=("calls",), backend=backend, dtype=dtype,
                              head_dim=head_dim, where=self.where, extra=extra, calls=n, over=over))
        if self.dropout:
            notes.append(Note("dropout: fused native_dropout kernel (bool mask saved, as on CUDA) x {calls} calls{traced}",
                              per_layer=("calls",), calls=self.dropout,
                              traced=" traced into the compiled graphs" if compiled else ""))
        return notes


def _bind_sdpa(args: tuple, kwargs: dict) -> dict:
    bound = dict(zip(_SDPA_ARGS, args))
    bound.update(kwargs)
    bound.setdefault("attn_mask", None)
    bound.setdefault("dropout_p", 0.0)
    bound.setdefault("is_causal", False)
    bound.setdefault("scale", None)
    bound.setdefault("enable_gqa", False)
    return bound


def convert_boolean_attn_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """attention.cpp ``convert_boolean_attn_mask``: bool -> additive mask of q's dtype."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask, 0.0, torch.scalar_tensor(-math.inf, dtype=dtype, device=mask.device))


def _aligned(t: torch.Tensor, alignment: int) -> bool:
    return all(s % alignment == 0 for s in t.stride()[:-1]) and t.stride(-1) == 1


def preprocess_mask(mask: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """attention.cpp ``preprocess_mask`` (mem_eff_alignment 8): pad_bias<8> when unaligned, then expand."""
    if not _aligned(mask, 8):
        last = mask.size(-1)
        mask = torch.nn.functional.pad(mask, (0, 8 - last % 8))[..., :last]
    return mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))


def _pad_last_dim(t: torch.Tensor, alignment: int) -> torch.Tensor:
    """attention.cpp ``pad_last_dim<alignment, false>``."""
    d = t.size(-1)
    return t if d % alignment == 0 else torch.nn.functional.pad(t, (0, alignment - d % alignment))


def _dense_ok(q, k, v) -> bool:
    # fused kernels: 4-d, same device, unit last-dim stride (check_tensor_shapes,
    # check_last_dim_stride_equals_1_dense), non-nested, dtypes the kernels know
    return (all(t.dim() == 4 for t in (q, k, v)) and all(t.stride(-1) == 1 for t in (q, k, v))
            and not any(t.is_nested for t in (q, k, v)) and str(q.dtype).removeprefix("torch.") in DTYPE_BYTES)


def _cuda_enabled() -> tuple[set[str], tuple[str, ...] | None]:
    enabled = {name for name, on in (
        ("flash", torch.backends.cuda.flash_sdp_enabled()),
        ("efficient", torch.backends.cuda.mem_efficient_sdp_enabled()),
        ("math", torch.backends.cuda.math_sdp_enabled()),
        ("cudnn", torch.backends.cuda.cudnn_sdp_enabled()),
    ) if on}
    order = sdp_priority_order()
    return enabled, (order if order != ("flash", "efficient", "math", "cudnn") else None)


def _standin(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor with ``t``'s sizes, dtype and ``requires_grad`` and no data to speak of (zero strides but the
    last). ``requires_grad`` matters: the CPU flash kernel has no gradient for ``attn_mask``, so PyTorch's choice
    (sdp_utils_cpp.cpp) takes math for a mask that requires grad (Doge's learned dynamic mask, SeamlessM4T's and
    Cohere ASR's relative-position bias); asked with a mask that does not, it answers flash. The stand-in mirrors
    the flag and PyTorch applies its own grad-mode rule to it."""
    last = t.stride(-1) if t.dim() else 1
    base = torch.empty(max(t.size(-1), 1) * max(abs(last), 1) if t.dim() else 1, dtype=t.dtype)
    strides = [0] * (t.dim() - 1) + ([last] if t.dim() else [])
    out = base.as_strided(tuple(t.shape), tuple(strides))
    return out.requires_grad_() if t.requires_grad else out


def cpu_sdpa_backend(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> str:
    """The backend real CPU tensors of these shapes take in this PyTorch build ("flash" or "math")."""
    # outside every mode: the recorder must not see this CPU-side question
    with DisableTorchFunction(), disable_current_modes():
        choice = fused_sdp_choice(
            _standin(q), _standin(k), _standin(v), None if attn_mask is None else _standin(attn_mask),
            dropout_p, is_causal, scale, enable_gqa)
    return "flash" if choice == "flash" else "math"


class KernelMode(TransparentFunctionMode):
    """Emulates the target's SDPA kernel choice (and CUDA's fused dropout) on meta tensors."""

    def __init__(self, target: str, compute_capability: tuple[int, int] | None, stats: KernelStats,
                 device_type: str = "meta", force: str | None = None):
        super().__init__()
        self.force = force  # "flash": --attn flash_attention_2 (cuda target), see trace/tracer.py _forward_emulation
        self.target = target
        self.cc = tuple(compute_capability) if compute_capability else None
        self.stats = stats
        self.device_type = device_type

    def handle(self, func, args, kwargs):
        try:
            if func == SDPA:
                return self._sdpa(_bind_sdpa(args, kwargs))
            if func == DROPOUT and self.target == "cuda":
                return self._dropout(args, kwargs)
        except TypeError:
            return PASS
        return PASS

    # -- dropout ------------------------------------------------------------------------------
    def _dropout(self, args, kwargs):
        bound = dict(zip(("input", "p", "train"), args))
        bound.update(kwargs)
        x, p, train = bound.get("input"), bound.get("p", 0.5), bound.get("train", True)
        if (isinstance(x, torch.Tensor) and x.device.type == self.device_type and train and 0 < p < 1
                and x.numel() > 0):  # Dropout.cpp is_fused_kernel_acceptable
            self.stats.dropout += 1
            return torch.ops.aten.native_dropout(x, p, True)[0]
        return PASS

    # -- SDPA ---------------------------------------------------------------------------------
    def _sdpa(self, b: dict):
        q, k, v = b["query"], b["key"], b["value"]
        if not all(isinstance(t, torch.Tensor) and t.device.type == self.device_type for t in (q, k, v)):
            return PASS
        if self.target == "cuda":
            backend = self._cuda_backend(b)
        else:
            backend = cpu_sdpa_backend(q, k, v, b["attn_mask"], b["dropout_p"], b["is_causal"], b["scale"],
                                       b["enable_gqa"])
        detail = []
        if k.size(-3) != q.size(-3) and q.dim() >= 3:
            detail.append(f"GQA {q.size(-3)}/{k.size(-3)} heads")
        if b["attn_mask"] is not None:
            detail.append("mask")
        if b["is_causal"]:
            detail.append("causal")
        self.stats.sdpa[(backend, str(q.dtype).removeprefix("torch."), q.size(-1), ", ".join(detail))] += 1
        if backend == "math":
            return SDPA(q, k, v, attn_mask=b["attn_mask"], dropout_p=b["dropout_p"], is_causal=b["is_causal"],
                        scale=b["scale"], enable_gqa=b["enable_gqa"])
        if self.target == "cpu":
            mask = convert_boolean_attn_mask(b["attn_mask"], q.dtype)
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                q, k, v, b["dropout_p"], b["is_causal"], attn_mask=mask, scale=b["scale"])[0]
        if backend == "flash":
            d = q.size(-1)
            og_scale = b["scale"] if b["scale"] is not None else 1.0 / math.sqrt(d)
            out = torch.ops.aten._scaled_dot_product_flash_attention(
                _pad_last_dim(q, 8), _pad_last_dim(k, 8), _pad_last_dim(v, 8), b["dropout_p"], b["is_causal"],
                False, scale=og_scale)[0]
            return out if out.size(-1) == d else out[..., :d]
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        mask = convert_boolean_attn_mask(b["attn_mask"], q.dtype)
        if backend == "efficient":
            if mask is not None:
                mask = preprocess_mask(mask, q, k)
            return torch.ops.aten._scaled_dot_product_efficient_attention(
                q, k, v, mask, grad, b["dropout_p"], b["is_causal"], scale=b["scale"])[0]
        # cudnn (convert_boolean_attn_mask_cudnn differs only in the fill value)
        return torch.ops.aten._scaled_dot_product_cudnn_attention(
            q, k, v, mask, grad, b["dropout_p"], b["is_causal"], False, scale=b["scale"])[0]

    def _cuda_backend(self, b: dict) -> str:
        q, k, v = b["query"], b["key"], b["value"]
        if not _dense_ok(q, k, v):
            return "math"
        call = SdpaCall(
            dtype=str(q.dtype).removeprefix("torch."), batch=q.size(0), heads=q.size(1), kv_heads=k.size(1),
            q_len=q.size(2), kv_len=k.size(2), head_dim=q.size(3), head_dim_v=v.size(3),
            has_mask=b["attn_mask"] is not None, is_causal=bool(b["is_causal"]), dropout_p=float(b["dropout_p"]),
            requires_grad=torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)),
            enable_gqa=bool(b["enable_gqa"]),
        )
        if self.force == "flash":
            return self._forced_flash(call)
        enabled, priority = _cuda_enabled()
        return choose_sdpa_backend(call, self.cc, enabled=enabled, priority=priority)

    def _forced_flash(self, call: SdpaCall) -> str:
        """flash_attention_2: the flash kernel, or flash-attn's own refusal as a one-line error."""
        cc = self.cc
        try:
            transformers_attention_backend("flash_attention_2", call, cc)
        except ValueError as e:
            raise MemgraphError(f"--attn flash_attention_2: {e}") from None
        if call.has_mask:
            raise MemgraphError("--attn flash_attention_2 with an attention mask (padding / position bias) is not "
                                "modelled: use --attn sdpa")
        if not can_use_flash(call, cc):
            raise MemgraphError(f"--attn flash_attention_2: the flash kernel cannot run {call} on sm{cc[0]}{cc[1]}")
        return "flash"


def kernel_factory(target: str, compute_capability, stats: KernelStats, device_type: str = "meta",
                   force: str | None = None):
    """A zero-argument factory of :class:`KernelMode` contexts (entered around forward + loss)."""
    return lambda: KernelMode(target, compute_capability, stats, device_type, force)


__all__ = ["KernelMode", "KernelStats", "convert_boolean_attn_mask", "cpu_sdpa_backend", "kernel_factory",
           "preprocess_mask"]
