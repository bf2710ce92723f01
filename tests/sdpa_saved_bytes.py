"""What each CUDA SDPA backend keeps for backward, as closed formulas over a call's shape.

The trace does not use these: it records the tensors the emulated kernels save (trace/emulate/sdpa_kernels.py). The
tests check the trace against these formulas, written from PyTorch's sources independently of the emulation
(they were in memgraph/facts/sdpa_backend.py; sources and caveats are in its docstring).
"""

from __future__ import annotations

from memgraph.facts.sdpa_backend import BACKENDS, LOW_PRECISION, SdpaCall, transformers_attention_backend, transformers_sdpa_call


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _converted_mask_bytes(call: SdpaCall) -> int:
    # convert_boolean_attn_mask: a bool [B,1,Lq,Lkv] mask becomes a new float mask in q's dtype.
    return call.batch * call.q_len * call.kv_len * call.itemsize


def saved_for_backward_bytes(call: SdpaCall, backend: str) -> dict[str, int]:
    """Bytes of the tensors a backend's forward creates and autograd keeps for backward.

    The caller's q, k, v, out (and mask) are not listed; tensors *derived* from them are (padded or
    upcast copies). Raw tensor bytes, before the caching allocator's rounding (512-byte blocks; see
    the allocator model for segments). Empty when ``call.requires_grad`` is False: the kernels still
    allocate e.g. the logsumexp during forward, but it dies with the forward.

    ``backend`` is a value of :func:`choose_sdpa_backend` or ``"math-eager"`` (transformers'
    ``eager_attention_forward``: explicit matmul + softmax(dtype=float32)).
    """
    if backend not in BACKENDS + ("math-eager",):
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS + ('math-eager',)}")
    if not call.requires_grad:
        return {}
    B, H, Hkv = call.batch, call.heads, call.kv_heads
    Lq, Lk, D, Dv = call.q_len, call.kv_len, call.head_dim, call.head_dim_v
    it = call.itemsize
    scores = B * H * Lq * Lk  # elements of one [B, H, Lq, Lkv] score/probability matrix
    out: dict[str, int] = {}

    if backend == "flash":
        # meta__scaled_dot_product_flash_attention / flash_api.cpp mha_fwd:
        # softmax_lse = empty({B, H, Lq}, float32)
        out["logsumexp"] = B * H * Lq * 4
        # mha_fwd always allocates rng_state = empty({2}, uint64, CUDA) and _unused = empty({}, uint64,
        # CUDA) ("[Note] BC breaking change to flash seed/offset"); both are saved as philox_seed/offset.
        out["philox_seed"] = 16
        out["philox_offset"] = 8
        if D % 8:
            # attention.cpp scaled_dot_product_attention: pad_last_dim<8, false>(q/k/v) makes padded
            # copies that the flash node saves; the output is allocated padded and the caller gets a
            # slice view (post_process_flash_output), so its storage is larger by the pad.
            Dp = _round_up(D, 8)
            out["query_padded"] = B * H * Lq * Dp * it
            out["key_padded"] = B * Hkv * Lk * Dp * it
            out["value_padded"] = B * Hkv * Lk * Dp * it
            out["out_padding"] = B * H * Lq * (Dp - D) * it
        return out

    if backend == "efficient":
        # meta__scaled_dot_product_efficient_attention: logsumexp {B, H, ceil(Lq/32)*32} float32
        # when compute_log_sumexp (= should_compute_logsumexp: requires grad).
        out["logsumexp"] = B * H * _round_up(Lq, 32) * 4
        # seed/offset: CPU scalars outside CUDA-graph capture (_efficient_attention_forward) -> 0 device bytes.
        if call.has_mask:
            # attention.cpp preprocess_mask: expand to [B, H, Lq, Lkv]; if Lkv % 16 != 0, pad_bias pads
            # the last dim to a multiple of 16, materializing the expanded bias; the node saves attn_bias.
            if Lk % 16:
                out["attn_bias"] = B * H * Lq * _round_up(Lk, 16) * it
            else:
                out["attn_bias"] = _converted_mask_bytes(call)
        return out

    if backend == "cudnn":
        # meta__scaled_dot_product_cudnn_attention: softmax stats {B, H, Lq, 1} float32
        out["logsumexp"] = B * H * Lq * 4
        if call.dropout_p > 0.0:
            out["philox_seed"] = 8
            out["philox_offset"] = 8
        if call.has_mask:
            out["attn_bias"] = _converted_mask_bytes(call)  # convert_boolean_attn_mask_cudnn
        return out

    if backend == "math":
        # _scaled_dot_product_attention_math: fp16/bf16 q/k/v are upcast to float32 unless
        # torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True); with enable_gqa (or a broadcast
        # kv head) k/v are repeated to H heads. Saved: q*sqrt(scale), (k*sqrt(scale))^T, the softmax
        # output, and v when it is a new tensor (upcast or repeated); dropout adds its bool mask
        # (native_dropout on CUDA) and the dropped probabilities.
        acc = 4 if call.dtype in LOW_PRECISION else it
        out["query_scaled"] = B * H * Lq * D * acc
        out["key_scaled"] = B * H * Lk * D * acc
        if call.dtype in LOW_PRECISION or Hkv != H:
            out["value_acc"] = B * H * Lk * Dv * acc
        out["attn_softmax"] = scores * acc
        if call.dropout_p > 0.0:
            out["dropout_mask"] = scores  # bool
            out["attn_dropped"] = scores * acc
        return out

    # math-eager: transformers eager_attention_forward
    #   key_states = repeat_kv(key); value_states = repeat_kv(value)   (copies when Hkv < H)
    #   w = softmax(q @ k^T * scaling [+ mask], dim=-1, dtype=float32).to(q.dtype)
    #   w = dropout(w); out = w @ v
    if Hkv != H:
        out["key_repeated"] = B * H * Lk * D * it
        out["value_repeated"] = B * H * Lk * Dv * it
    out["attn_softmax_fp32"] = scores * 4  # softmax(dtype=float32) saves its float32 output
    if call.dropout_p > 0.0:
        out["dropout_mask"] = scores  # native_dropout on CUDA saves a bool mask
        out["attn_dropped"] = scores * it  # saved by the second matmul
    elif it != 4:
        out["attn_weights"] = scores * it  # the .to(q.dtype) copy, saved by the second matmul
    return out



def transformers_saved_for_backward_bytes(
    attn_implementation: str, call: SdpaCall, cc: tuple[int, int], **sdpa_kwargs
) -> dict[str, int]:
    """Everything a transformers attention layer keeps for backward beyond the module's q/k/v/out.

    For ``"sdpa"`` this adds transformers' ``repeat_kv`` copies to the kernel's own saved tensors
    when the kernel keeps them: fused kernels save their k/v inputs, so repeated copies live until
    backward; the math kernel saves scaled (and, for fp16/bf16, upcast) copies instead, so there only
    the repeated value of a float32 call survives (math saves its v input as is).
    """
    backend = transformers_attention_backend(attn_implementation, call, cc, **sdpa_kwargs)
    if attn_implementation != "sdpa":
        return saved_for_backward_bytes(call, backend)
    eff = transformers_sdpa_call(call)
    saved = dict(saved_for_backward_bytes(eff, backend))
    repeated = call.heads != call.kv_heads and eff.kv_heads == eff.heads and eff.heads == call.heads
    if repeated and call.requires_grad:
        if backend in ("flash", "efficient", "cudnn"):
            saved["key_repeated"] = eff.batch * eff.heads * eff.kv_len * eff.head_dim * eff.itemsize
        if backend in ("flash", "efficient", "cudnn") or eff.dtype == "float32":
            saved["value_repeated"] = eff.batch * eff.heads * eff.kv_len * eff.head_dim_v * eff.itemsize
    return saved
