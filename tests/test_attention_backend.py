import types

import pytest
import torch

from memgraph.facts.sdpa_backend import (
    SdpaCall,
    choose_sdpa_backend,
    cudnn_preferred,
    minimum_gemm_alignment,
    transformers_attention_backend,
    transformers_sdpa_call,
)
from tests.sdpa_saved_bytes import saved_for_backward_bytes, transformers_saved_for_backward_bytes

H100, A100, A10G, T4, V100 = (9, 0), (8, 0), (8, 6), (7, 5), (7, 0)


def call(dtype="bfloat16", B=2, H=32, Hkv=None, Lq=4096, Lk=None, D=128, Dv=None, mask=False, causal=True,
         dropout=0.0, grad=True, gqa=False):
    return SdpaCall(dtype=dtype, batch=B, heads=H, kv_heads=H if Hkv is None else Hkv, q_len=Lq,
                    kv_len=Lq if Lk is None else Lk, head_dim=D, head_dim_v=D if Dv is None else Dv,
                    has_mask=mask, is_causal=causal, dropout_p=dropout, requires_grad=grad, enable_gqa=gqa)


# --------------------------------------------------------------------------- backend choice


def test_basic_choices():
    assert choose_sdpa_backend(call(), H100) == "flash"
    assert choose_sdpa_backend(call(dtype="float16"), A100) == "flash"
    assert choose_sdpa_backend(call(dtype="float32"), H100) == "efficient"  # flash: fp16/bf16 only
    assert choose_sdpa_backend(call(dtype="float16", mask=True, causal=False), H100) == "efficient"
    assert choose_sdpa_backend(call(dtype="float16"), T4) == "efficient"  # flash needs sm80+
    assert choose_sdpa_backend(call(dtype="bfloat16"), T4) == "math"  # efficient: no bf16 below sm80
    assert choose_sdpa_backend(call(dtype="float32"), V100) == "efficient"


def test_head_dim_rules():
    # 512 > 256: flash out; efficient has no upper bound, only alignment (8 for fp16 on sm80+)
    assert choose_sdpa_backend(call(dtype="float16", D=512), H100) == "efficient"
    assert choose_sdpa_backend(call(dtype="float16", D=256), H100) == "flash"
    # flash pads non-multiple-of-8 head dims; efficient would need alignment 8
    assert choose_sdpa_backend(call(dtype="float16", D=100), H100) == "flash"
    assert choose_sdpa_backend(call(dtype="float16", D=100, mask=True, causal=False), H100) == "math"
    # different v head dim: flash needs q/k/v equal
    assert choose_sdpa_backend(call(dtype="bfloat16", D=192, Dv=128), H100) == "efficient"
    # sm86 training with head_dim in (192, 224]: flash refuses, efficient takes it
    assert choose_sdpa_backend(call(D=208), A10G) == "efficient"
    assert choose_sdpa_backend(call(D=208, grad=False), A10G) == "flash"
    assert choose_sdpa_backend(call(D=256), A10G) == "flash"  # > 224 without dropout is fine
    assert choose_sdpa_backend(call(D=256, dropout=0.1), A10G) == "efficient"
    assert choose_sdpa_backend(call(D=208), H100) == "flash"  # the rule is sm86-89/sm120 only


def test_alignment():
    assert minimum_gemm_alignment(call(dtype="float16"), H100) == 8
    assert minimum_gemm_alignment(call(dtype="float32"), H100) == 4
    assert minimum_gemm_alignment(call(dtype="float16"), T4) == 8
    assert minimum_gemm_alignment(call(dtype="float32"), T4) == 1
    assert choose_sdpa_backend(call(dtype="float32", D=66), H100) == "math"
    assert choose_sdpa_backend(call(dtype="float32", D=66), T4) == "efficient"


def test_causal_non_square_and_gqa():
    # is_causal with Lq != Lkv: flash refuses, efficient takes it
    assert choose_sdpa_backend(call(Lq=1024, Lk=2048), H100) == "efficient"
    # GQA: flash supports it with enable_gqa=True; efficient does not (torch 2.13)
    assert choose_sdpa_backend(call(Hkv=8, gqa=True), H100) == "flash"
    assert choose_sdpa_backend(call(Hkv=8, gqa=False), H100) == "math"
    assert choose_sdpa_backend(call(dtype="float32", Hkv=8, gqa=True), H100) == "math"
    assert choose_sdpa_backend(call(Hkv=8, gqa=True, mask=True, causal=False), H100) == "math"


def test_enabled_and_cudnn_priority():
    c = call()
    assert choose_sdpa_backend(c, H100, enabled=("efficient", "math")) == "efficient"
    assert choose_sdpa_backend(c, H100, enabled=("math",)) == "math"
    with pytest.raises(RuntimeError):
        choose_sdpa_backend(call(dtype="float32"), H100, enabled=("flash",))
    # cuDNN is after math by default (Context.h) ...
    assert choose_sdpa_backend(c, H100, cudnn_version=91002) == "flash"
    assert not cudnn_preferred(H100, 91002)
    # ... and first on sm90 with cuDNN > 9.15.0 (check_prefer_cudnn_attention)
    assert cudnn_preferred(H100, 91900)
    assert choose_sdpa_backend(c, H100, cudnn_version=91900) == "cudnn"
    assert not cudnn_preferred(A100, 91900)
    assert cudnn_preferred((10, 0), 91900, cuda_major=13) and not cudnn_preferred((10, 1), 91900, cuda_major=12)
    # cuDNN head-dim limit 128 below 9.22 -> falls through to flash
    assert choose_sdpa_backend(call(D=256), H100, cudnn_version=91900) == "flash"
    assert choose_sdpa_backend(call(D=256), H100, cudnn_version=92300) == "cudnn"
    # dropout must be a multiple of 1/16 for cuDNN
    assert choose_sdpa_backend(call(dropout=0.1), H100, cudnn_version=91900) == "flash"
    assert choose_sdpa_backend(call(dropout=0.125), H100, cudnn_version=91900) == "cudnn"


# --------------------------------------------------------------------------- saved bytes (by hand)


def test_flash_saved_bytes():
    s = saved_for_backward_bytes(call(), "flash")
    assert s["logsumexp"] == 2 * 32 * 4096 * 4 == 1_048_576
    assert s["philox_seed"] == 16 and s["philox_offset"] == 8
    assert saved_for_backward_bytes(call(grad=False), "flash") == {}
    padded = saved_for_backward_bytes(call(D=100, B=1, H=2, Lq=10), "flash")
    assert padded["query_padded"] == 1 * 2 * 10 * 104 * 2
    assert padded["out_padding"] == 1 * 2 * 10 * 4 * 2


def test_efficient_saved_bytes():
    s = saved_for_backward_bytes(call(Lq=4000, dtype="float32"), "efficient")
    assert s == {"logsumexp": 2 * 32 * 4000 // 32 * 32 * 4}  # 4000 is a multiple of 32
    s = saved_for_backward_bytes(call(Lq=4001, dtype="float32"), "efficient")
    assert s["logsumexp"] == 2 * 32 * 4032 * 4
    masked = saved_for_backward_bytes(call(Lq=100, mask=True, causal=False), "efficient")
    assert masked["attn_bias"] == 2 * 32 * 100 * 112 * 2  # Lkv=100 padded to 112, expanded over heads
    aligned = saved_for_backward_bytes(call(Lq=128, mask=True, causal=False), "efficient")
    assert aligned["attn_bias"] == 2 * 128 * 128 * 2  # converted [B,1,Lq,Lkv] mask, expand is a view


def test_math_and_eager_saved_bytes():
    c = call(B=2, H=4, Lq=16, D=64)
    m = saved_for_backward_bytes(c, "math")  # bf16 upcast to fp32
    assert m == {"query_scaled": 2 * 4 * 16 * 64 * 4, "key_scaled": 2 * 4 * 16 * 64 * 4,
                 "value_acc": 2 * 4 * 16 * 64 * 4, "attn_softmax": 2 * 4 * 16 * 16 * 4}
    md = saved_for_backward_bytes(call(B=2, H=4, Lq=16, D=64, dropout=0.1), "math")
    assert md["dropout_mask"] == 2 * 4 * 16 * 16 and md["attn_dropped"] == 2 * 4 * 16 * 16 * 4
    e = saved_for_backward_bytes(call(B=2, H=4, Hkv=2, Lq=16, D=64), "math-eager")
    assert e == {"key_repeated": 2 * 4 * 16 * 64 * 2, "value_repeated": 2 * 4 * 16 * 64 * 2,
                 "attn_softmax_fp32": 2 * 4 * 16 * 16 * 4, "attn_weights": 2 * 4 * 16 * 16 * 2}
    with pytest.raises(ValueError):
        saved_for_backward_bytes(c, "xformers")


# --------------------------------------------------------------------------- checks against torch 2.13 itself


def _saved_storage_bytes(fn, inputs):
    owned = {t.untyped_storage().data_ptr() for t in inputs}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in owned:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sorted(seen.values())


@pytest.mark.parametrize("dtype,gqa", [(torch.bfloat16, False), (torch.float32, False), (torch.float32, True), (torch.float16, True)])
def test_math_formula_matches_torch_math_kernel(dtype, gqa):
    B, H, Hkv, L, S, D = 2, 4, (2 if gqa else 4), 16, 24, 64
    q = torch.randn(B, H, L, D, dtype=dtype, requires_grad=True)
    k = torch.randn(B, Hkv, S, D, dtype=dtype, requires_grad=True)
    v = torch.randn(B, Hkv, S, D, dtype=dtype, requires_grad=True)
    got = _saved_storage_bytes(
        lambda: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, None, 0.0, False, None, enable_gqa=gqa),
        (q, k, v))
    c = SdpaCall(dtype=str(dtype).split(".")[1], batch=B, heads=H, kv_heads=Hkv, q_len=L, kv_len=S, head_dim=D,
                 head_dim_v=D, has_mask=False, is_causal=False, dropout_p=0.0, requires_grad=True, enable_gqa=gqa)
    want = saved_for_backward_bytes(c, "math")
    assert got == sorted(want.values())


@pytest.mark.parametrize("dtype,kv_heads", [(torch.bfloat16, 2), (torch.bfloat16, 4), (torch.float32, 2)])
def test_eager_formula_matches_transformers_eager(dtype, kv_heads):
    from transformers.models.llama.modeling_llama import eager_attention_forward

    B, H, L, D = 2, 4, 16, 64
    q = torch.randn(B, H, L, D, dtype=dtype, requires_grad=True)
    k = torch.randn(B, kv_heads, L, D, dtype=dtype, requires_grad=True)
    v = torch.randn(B, kv_heads, L, D, dtype=dtype, requires_grad=True)
    module = types.SimpleNamespace(num_key_value_groups=H // kv_heads, training=True)
    got = _saved_storage_bytes(lambda: eager_attention_forward(module, q, k, v, None, scaling=D**-0.5), (q, k, v))
    c = call(dtype=str(dtype).split(".")[1], B=B, H=H, Hkv=kv_heads, Lq=L, D=D)
    want = saved_for_backward_bytes(c, "math-eager")
    # the `* scaling` multiply saves a 0-dim scalar (8 bytes on CPU); nothing else differs
    assert [b for b in got if b > 8] == sorted(want.values())


def test_fused_meta_shapes_match_formulas():
    B, H, L, D = 2, 3, 100, 64
    q = torch.empty(B, H, L, D, dtype=torch.bfloat16, device="meta")
    flash = torch.ops.aten._scaled_dot_product_flash_attention(q, q, q, 0.0, True)
    assert tuple(flash[1].shape) == (B, H, L) and flash[1].dtype == torch.float32
    assert tuple(flash[6].shape) == (2,) and flash[6].dtype == torch.uint64
    eff = torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, True)
    assert tuple(eff[1].shape) == (B, H, 128)  # ceil(100 / 32) * 32
    c = call(B=B, H=H, Lq=L, D=D)
    assert saved_for_backward_bytes(c, "flash")["logsumexp"] == flash[1].numel() * 4
    assert saved_for_backward_bytes(c, "efficient")["logsumexp"] == eff[1].numel() * 4


# --------------------------------------------------------------------------- transformers


def test_transformers_backends():
    c = call(Hkv=8)
    assert transformers_attention_backend("eager", c, H100) == "math-eager"
    assert transformers_attention_backend("sdpa", c, H100) == "flash"  # no mask -> enable_gqa=True
    assert transformers_attention_backend("flash_attention_2", c, H100) == "flash"
    # a padding mask: repeat_kv, then efficient (flash takes no mask)
    masked = call(Hkv=8, mask=True)
    eff = transformers_sdpa_call(masked)
    assert eff.kv_heads == 32 and not eff.enable_gqa and not eff.is_causal
    assert transformers_attention_backend("sdpa", masked, H100) == "efficient"
    # fp32 GQA without mask: enable_gqa -> only math accepts it
    assert transformers_attention_backend("sdpa", call(dtype="float32", Hkv=8), H100) == "math"
    with pytest.raises(ValueError, match="float16/bfloat16"):
        transformers_attention_backend("flash_attention_2", call(dtype="float32"), H100)
    with pytest.raises(ValueError, match="8.0"):
        transformers_attention_backend("flash_attention_2", call(dtype="float16"), T4)
    with pytest.raises(ValueError):
        transformers_attention_backend("flex_attention", c, H100)


def test_transformers_sdpa_call_rules():
    # causal prefill with a longer kv: cropped to q_len so flash can run
    c = transformers_sdpa_call(call(Lq=128, Lk=512))
    assert c.kv_len == 128 and c.is_causal
    # decode step with GQA and a mask: pack_gqa
    d = transformers_sdpa_call(call(H=32, Hkv=8, Lq=1, Lk=512, mask=True, causal=True))
    assert (d.heads, d.kv_heads, d.q_len, d.is_causal) == (8, 8, 4, False)


def test_transformers_saved_bytes_include_repeat_kv():
    masked = call(B=1, H=32, Hkv=8, Lq=128, mask=True)
    saved = transformers_saved_for_backward_bytes("sdpa", masked, H100)
    assert saved["key_repeated"] == 1 * 32 * 128 * 128 * 2
    assert saved["value_repeated"] == 1 * 32 * 128 * 128 * 2
    assert saved["logsumexp"] == 1 * 32 * 128 * 4
    gqa = transformers_saved_for_backward_bytes("sdpa", call(B=1, H=32, Hkv=8, Lq=128), H100)
    assert "key_repeated" not in gqa  # flash reads the 8 kv heads directly
