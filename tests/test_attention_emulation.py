"""SDPA (and dropout) kernel emulation: what each kernel keeps for backward, by hand.

One attention call, B=2 batch, H=4 heads, S=128 tokens, D=64 head dim, causal. The bytes below are
the storages autograd saves for backward *besides* q, k and v themselves.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from memgraph.analysis.group_by import at_depth
from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.trace.emulate.sdpa_kernels import KernelMode, KernelStats, cpu_sdpa_backend

B, H, S, D = 2, 4, 128, 64
BF16, F32 = 2, 4

# flash (meta__scaled_dot_product_flash_attention / flash_api.cpp mha_fwd): the output, a float32
# logsumexp [B, H, S], and the philox RNG state: seed = uint64[2] (16 B) and offset = uint64[] (8 B).
FLASH_OUT = B * H * S * D * BF16  # 131,072
FLASH_LSE = B * H * S * F32  # 4,096
FLASH_SAVED = FLASH_OUT + FLASH_LSE + 16 + 8
assert FLASH_SAVED == 135_192

# math (_scaled_dot_product_attention_math): bf16 q/k/v are upcast to float32 first; it saves
# q * sqrt(scale) [B*H, S, D], (k * sqrt(scale))^T [B*H, D, S], the float32 v, and the float32
# softmax [B*H, S, S] -- the S x S matrix flash never materialises.
MATH_Q = MATH_K = MATH_V = B * H * S * D * F32  # 262,144 each
MATH_SOFTMAX = B * H * S * S * F32  # 524,288
MATH_SAVED = MATH_Q + MATH_K + MATH_V + MATH_SOFTMAX
assert MATH_SAVED == 1_310_720

# efficient, float32 (flash needs fp16/bf16): output, logsumexp [B, H, ceil(S/32)*32] float32, and
# seed/offset (two int64 scalars; CPU tensors on CUDA, 8-byte meta tensors here).
EFF_OUT = B * H * S * D * F32
EFF_LSE = B * H * (math.ceil(S / 32) * 32) * F32
EFF_SAVED = EFF_OUT + EFF_LSE + 8 + 8


def _qkv(dtype=torch.bfloat16, kv_heads=H):
    def one(h):
        return torch.randn(B, h, S, D, device="meta", dtype=dtype, requires_grad=True)

    return one(H), one(kv_heads), one(kv_heads)


def _saved(fn, inputs):
    """{storage: (bytes, dtype, shape)} that autograd saved while running fn, minus the inputs'."""
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st._cdata] = (st.nbytes(), t.dtype, tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    skip = {t.untyped_storage()._cdata for t in inputs}
    return {k: v for k, v in seen.items() if k not in skip}, out


def _emulated(cc, q, k, v, target="cuda", **kw):
    stats = KernelStats(target, "test")
    with KernelMode(target, cc, stats):
        saved, out = _saved(lambda: F.scaled_dot_product_attention(q, k, v, **kw), [q, k, v])
    return saved, out, stats


def test_flash_keeps_output_and_float32_logsumexp_only():
    q, k, v = _qkv()
    saved, out, stats = _emulated((9, 0), q, k, v, is_causal=True)
    assert list(stats.sdpa) == [("flash", "bfloat16", D, "causal")]
    assert sum(b for b, _, _ in saved.values()) == FLASH_SAVED
    assert sorted(saved.values(), key=lambda s: s[0]) == [
        (8, torch.uint64, ()), (16, torch.uint64, (2,)), (FLASH_LSE, torch.float32, (B, H, S)),
        (FLASH_OUT, torch.bfloat16, (B, H, S, D))]
    assert out.shape == (B, H, S, D) and out.dtype == torch.bfloat16
    out.sum().backward()  # autograd through the flash kernel works on meta
    assert q.grad.shape == q.shape


def test_math_path_saves_the_seq_by_seq_softmax():
    q, k, v = _qkv()
    saved, _ = _saved(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])  # plain meta
    assert sum(b for b, _, _ in saved.values()) == MATH_SAVED
    assert max(b for b, _, _ in saved.values()) == MATH_SOFTMAX
    assert MATH_SAVED / FLASH_SAVED > 9


def test_float32_on_h100_takes_the_efficient_kernel():
    q, k, v = _qkv(torch.float32)
    saved, _, stats = _emulated((9, 0), q, k, v, is_causal=True)
    assert list(stats.sdpa) == [("efficient", "float32", D, "causal")]
    assert sum(b for b, _, _ in saved.values()) == EFF_SAVED


def test_gqa_goes_to_flash_with_the_small_kv():
    # enable_gqa (what transformers passes without a mask): flash takes k/v with 2 heads as they
    # are, no repeat_interleave copies; the efficient kernel has no GQA in torch 2.13 (-> math).
    q, k, v = _qkv(kv_heads=2)
    saved, out, stats = _emulated((9, 0), q, k, v, is_causal=True, enable_gqa=True)
    assert list(stats.sdpa) == [("flash", "bfloat16", D, "GQA 4/2 heads, causal")]
    assert sum(b for b, _, _ in saved.values()) == FLASH_SAVED
    out.sum().backward()
    assert k.grad.shape == (B, 2, S, D)
    q32, k32, v32 = _qkv(torch.float32, kv_heads=2)
    _, _, stats = _emulated((9, 0), q32, k32, v32, is_causal=True, enable_gqa=True)
    assert list(stats.sdpa)[0][0] == "math"


@pytest.mark.parametrize("cc, dtype, backend", [
    ((7, 5), torch.bfloat16, "math"),  # T4: no bf16 in flash (sm80+) nor in efficient below sm80
    ((7, 5), torch.float16, "efficient"),  # T4: flash needs sm80
    ((8, 0), torch.float16, "flash"),
    ((8, 6), torch.bfloat16, "flash"),
])
def test_backend_follows_the_target_gpu(cc, dtype, backend):
    q, k, v = _qkv(dtype)
    _, _, stats = _emulated(cc, q, k, v, is_causal=True)
    assert list(stats.sdpa)[0][0] == backend


def test_boolean_mask_goes_to_efficient_as_an_expanded_additive_bias():
    # flash takes no mask; efficient gets where(mask, 0, -inf) in q's dtype: one [B,1,S,S] bf16 bias
    # (S = 128 is a multiple of 8, so preprocess_mask does not pad), expanded (a view) to [B,H,S,S].
    q, k, v = _qkv()
    mask = torch.ones(B, 1, S, S, dtype=torch.bool, device="meta")
    saved, _, stats = _emulated((9, 0), q, k, v, attn_mask=mask)
    assert list(stats.sdpa)[0][0] == "efficient"
    bias = B * 1 * S * S * BF16
    lse = B * H * S * F32
    assert sum(b for b, _, _ in saved.values()) == B * H * S * D * BF16 + lse + bias + 8 + 8


def test_cpu_target_asks_this_pytorch_which_kernel_it_would_run():
    q, k, v = _qkv(torch.float32)
    assert cpu_sdpa_backend(q, k, v, None, 0.0, True, None, False) == "flash"
    assert cpu_sdpa_backend(q, k, v, None, 0.1, False, None, False) == "math"  # no dropout in CPU flash
    # a float mask: flash takes it, unless it requires grad (Doge's learned mask): the CPU flash kernel has no
    # gradient for attn_mask, so the real choice (torch._fused_sdp_choice on CPU tensors) is math
    mask = torch.zeros(q.size(0), 1, q.size(2), k.size(2), device="meta")
    assert cpu_sdpa_backend(q, k, v, mask, 0.0, False, None, False) == "flash"
    assert cpu_sdpa_backend(q, k, v, mask.requires_grad_(), 0.0, False, None, False) == "math"
    saved, _, stats = _emulated(None, q, k, v, target="cpu", is_causal=True)
    # _scaled_dot_product_flash_attention_for_cpu: out + float32 logsumexp [B, H, S]
    assert sum(b for b, _, _ in saved.values()) == B * H * S * D * F32 + B * H * S * F32


@pytest.mark.slow
def test_cpu_sdpa_prediction_matches_the_cpu_measurement():
    # The CPU picks its flash kernel for fp32; before this emulation the meta math path over-predicted
    # this step by a third (38.0 MB against 28.6 MB measured). Tolerance 1%: tighter than the 2% promise,
    # to catch the SDPA emulation drifting (a math-path fallback would be off by a third).
    opts = dict(target="cpu", attn_implementation="sdpa", seq_len=256, batch_size=4)
    predicted = analyze("tests/configs/tiny-llama.json", **opts).steady_state_peak.bytes
    measured = measure("tests/configs/tiny-llama.json", device="cpu", **opts)["iterations"][1]["peak_allocated"]
    assert abs(predicted - measured) / measured < 0.01


def test_fused_dropout_saves_a_bool_mask_on_the_cuda_target():
    x = torch.randn(64, 128, device="meta", requires_grad=True)
    saved_meta, _ = _saved(lambda: F.dropout(x, 0.1, True), [x])
    stats = KernelStats("cuda", "sm90")
    with KernelMode("cuda", (9, 0), stats):
        saved_cuda, y = _saved(lambda: F.dropout(x, 0.1, True), [x])
    assert [b for b, _, _ in saved_meta.values()] == [64 * 128 * F32]  # CPU/meta: a float noise tensor
    assert [(b, t) for b, t, _ in saved_cuda.values()] == [(64 * 128, torch.bool)]  # native_dropout's mask
    assert stats.dropout == 1 and y.shape == x.shape


def test_llama_sdpa_trace_notes_and_activations_shrink():
    opts = dict(attn_implementation="sdpa", seq_len=64, precision="bf16-mixed")
    r = analyze("tests/configs/tiny-llama.json", **opts)
    assert any(n.startswith("SDPA: flash kernel (bfloat16, head_dim 16, sm90, GQA 4/2 heads, causal) x 4 calls")
               for n in r.notes)
    eager = analyze("tests/configs/tiny-llama.json", **{**opts, "attn_implementation": "eager"})
    assert not any(n.startswith("SDPA") for n in eager.notes)
    # eager saves (among others) the float32 softmax [1, 4 heads, 64, 64] of every layer; flash does not
    saved = {m.module: m.saved_activation_bytes for m in at_depth(r.modules, 3)}
    saved_eager = {m.module: m.saved_activation_bytes for m in at_depth(eager.modules, 3)}
    for layer in ("model.layers.0", "model.layers.1"):
        assert saved_eager[layer] - saved[layer] >= 4 * 64 * 64 * F32


def test_gradient_checkpointing_recompute_reenters_the_emulation():
    # the recompute in backward runs the flash kernel in bf16 again (the autocast emulation is
    # re-entered through checkpoint's context_fn), so every checkpointed layer calls SDPA twice
    r = analyze("tests/configs/tiny-vit.json", attn_implementation="sdpa", precision="bf16-mixed",
                gradient_checkpointing=True)
    assert any(n.startswith("SDPA: flash kernel (bfloat16, head_dim 16, sm90) x 8 calls") for n in r.notes)


def test_flash_attention_2_is_the_flash_kernel_and_refuses_float32():
    r = analyze("tests/configs/tiny-llama.json", attn_implementation="flash_attention_2", seq_len=64,
                precision="bf16-mixed")
    assert any(n.startswith("flash_attention_2: traced as") for n in r.notes)
    assert any(n.startswith("SDPA: flash kernel (bfloat16") for n in r.notes)
    with pytest.raises(MemgraphError, match="flash_attention_2 needs float16/bfloat16"):
        analyze("tests/configs/tiny-llama.json", attn_implementation="flash_attention_2", seq_len=64)
    with pytest.raises(MemgraphError, match="needs a GPU"):
        analyze("tests/configs/tiny-llama.json", attn_implementation="flash_attention_2", target="cpu")
