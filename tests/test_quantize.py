"""--quantize 4bit: bitsandbytes 0.50.1's NF4 storage and its dequantised-weight temporaries, by hand."""

import pytest
import torch

from memgraph.api import analyze
from memgraph.model_spec.quantize import Linear4bitStandIn, storage_bytes
from memgraph.trace.record.recorder import ALLOC, FREE, Recorder
from tests.conftest import CONFIGS

BF16, F32 = 2, 4


def test_nf4_storage_of_one_weight_by_hand():
    """gate_proj [128, 64] = 8192 elements: 4096 B of packed codes (two per byte); 8192 / 64 = 128 blocks, whose
    absmax is quantised to uint8 (128 B) with a float32 offset (4 B), one float32 second-level absmax per 256
    blocks (1 -> 4 B) and a copy of the 256-value dynamic map (1024 B); the 16-value NF4 table (64 B)."""
    assert storage_bytes(128 * 64) == dict(weight=4096, code=64, absmax=128, offset=4, state2_absmax=4,
                                           state2_code=1024)
    assert storage_bytes(128 * 64, double_quant=False)["absmax"] == 128 * F32
    # the whole weight: 5316 B against 16384 B in bfloat16


def test_nf4_storage_in_the_trace():
    """On the cuda target each tensor is a 512-byte multiple: weight 4096; code, absmax, offset, state2_absmax:
    512 each; state2_code 1024."""
    r = analyze(str(CONFIGS / "tiny-llama.json"), seq_len=32, lora_rank=4, quantize="4bit", precision="bf16",
                gpu="h100-80gb")
    rows = {m.module: m for m in r.modules}
    gate = rows["model.layers.0.mlp.gate_proj"]  # no adapter (PEFT's llama default: q_proj, v_proj)
    assert (gate.parameter_bytes, gate.buffer_bytes, gate.trainable_parameters) == (4096, 4 * 512 + 1024, 0)
    assert rows["model.layers.0.self_attn.q_proj.base_layer"].parameter_bytes == 64 * 64 // 2
    # the output embedding stays unquantised, and PEFT's prepare_model_for_kbit_training (assumed by default)
    # upcasts it to float32: 1000 x 64 x 4 B; without the preparation it keeps the model's bfloat16
    assert rows["lm_head"].parameter_bytes == 1000 * 64 * 4
    assert rows["model.embed_tokens"].parameter_bytes == 1000 * 64 * 4  # the input embedding, upcast the same way
    bare = analyze(str(CONFIGS / "tiny-llama.json"), seq_len=32, lora_rank=4, quantize="4bit", precision="bf16",
                   gpu="h100-80gb", no_kbit_preparation=True)
    rows = {m.module: m for m in bare.modules}
    assert rows["lm_head"].parameter_bytes == 1000 * 64 * BF16
    assert bare.assumptions[-1] == "precision bf16"  # no k-bit preparation stated
    assert "prepare_model_for_kbit_training" in r.assumptions[-1] and r.options["gradient_checkpointing"] is False


def _live_peak(fn, *existing):
    """Peak live bytes of what ``fn`` allocates on meta, as the recorder sees it (``existing``: tensors made
    before, registered so that they are not counted)."""
    rec = Recorder()
    for i, t in enumerate(existing):
        rec.register(t, "input", f"t{i}")
    base = sum(rec.log.storages[sid].nbytes for _, sid in rec.log.events)
    with rec:
        fn()
    rec.close()
    live = peak = 0
    for kind, sid in rec.log.events:
        live += rec.log.storages[sid].nbytes if kind == ALLOC else -rec.log.storages[sid].nbytes if kind == FREE else 0
        peak = max(peak, live)
    return peak - base


M, IN, OUT = 2048, 256, 512  # M > 1536 rows: bitsandbytes' dequantise + F.linear fallback, on every GPU
BLOCKS = IN * OUT // 64


def _layer_and_input():
    with torch.device("meta"):
        layer = Linear4bitStandIn(torch.nn.Linear(IN, OUT, bias=False, dtype=torch.bfloat16), torch.bfloat16)
        x = torch.empty(M, IN, dtype=torch.bfloat16, requires_grad=True)
    return layer, x


def test_forward_holds_the_dequantised_weight_while_it_multiplies():
    """_dequant_linear_fallback: absmax_dq [BLOCKS] f32, absmax_dq + offset [BLOCKS] f32, B_dq [OUT, IN] bf16,
    then F.linear's output [M, OUT] bf16, all alive at once (the input x was made before the recording)."""
    layer, x = _layer_and_input()
    peak = _live_peak(lambda: layer(x), x, *layer.buffers())
    assert peak == 2 * BLOCKS * F32 + OUT * IN * BF16 + M * OUT * BF16


def test_backward_dequantises_again():
    """MatMul4Bit.backward: dequantize_blockwise's absmax [BLOCKS] f32 (+= offset in place), the weight
    [OUT, IN] bf16 and grad_x [M, IN] bf16, besides the incoming gradient [M, OUT] bf16."""
    layer, x = _layer_and_input()
    y = layer(x)
    grad = torch.empty_like(y)
    peak = _live_peak(lambda: y.backward(grad), x, y, grad, *layer.buffers())
    assert peak == BLOCKS * F32 + OUT * IN * BF16 + M * IN * BF16


def test_small_row_count_takes_the_fused_kernel():
    """rows <= 4 (_GEMM_4BIT_CUSTOM_FLOOR_M): the fused cgemm_4bit kernel allocates only its output."""
    layer, _ = _layer_and_input()
    x = torch.empty(4, IN, dtype=torch.bfloat16, device="meta")
    assert _live_peak(lambda: layer(x), x, *layer.buffers()) == 4 * OUT * BF16


@pytest.mark.parametrize("kw, text", [(dict(precision="bf16-mixed"), "not modelled"),
                                      (dict(dora=True), "--dora with --quantize")])
def test_quantize_refusals(kw, text):
    from memgraph.errors import MemgraphError
    from memgraph.model_spec.options import TrainingOptions

    with pytest.raises(MemgraphError, match=text):
        TrainingOptions(lora_rank=4, quantize="4bit", **kw)


def test_measuring_a_quantized_step_is_refused():
    """The stand-in allocates like bitsandbytes but computes nothing: a real run must not use it."""
    from memgraph.errors import MemgraphError
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.model_spec.quantize import quantize_base_linears

    with pytest.raises(MemgraphError, match="drop --quantize to measure"):
        quantize_base_linears(torch.nn.Sequential(torch.nn.Linear(4, 4)), TrainingOptions(lora_rank=4, quantize="4bit"))


def test_int8_storage_in_the_trace():
    """LLM.int8: int8 weight (gate_proj [128, 64]: 8192 B) and float32 SCB [128] (512 B, rounded from 512)."""
    r = analyze(str(CONFIGS / "tiny-llama.json"), seq_len=32, lora_rank=4, quantize="8bit", precision="bf16",
                gpu="h100-80gb")
    gate = {m.module: m for m in r.modules}["model.layers.0.mlp.gate_proj"]
    assert (gate.parameter_bytes, gate.buffer_bytes) == (128 * 64, 128 * F32)
    assert r.ops["unknown"] == {}


def _int8_layer():
    from memgraph.model_spec.quantize import Linear8bitLtStandIn

    with torch.device("meta"):
        layer = Linear8bitLtStandIn(torch.nn.Linear(IN, OUT, bias=False, dtype=torch.bfloat16))
        x = torch.empty(M, IN, dtype=torch.bfloat16, requires_grad=True)
    return layer, x


def test_int8_forward_allocations_by_hand():
    """MatMul8bitLt.forward, bf16 input: its float16 copy [M, IN] and, inside int8_vectorwise_quant,
    row_stats [M] f32 + out_row [M, IN] int8 + |A| [M, IN] f16 + the bool mask |A| >= 6 [M, IN]. Then
    int8_scaled_mm: int32 [M, OUT], int8_mm_dequant's float16 [M, OUT] and its .to(bfloat16) [M, OUT] alive
    together, with CA (out_row) and SCA (row_stats), locals of forward until it returns."""
    layer, x = _int8_layer()
    quant = M * IN * 2 + M * F32 + M * IN * 1 + M * IN * 2 + M * IN  # f16 copy, row_stats, out_row, |A|, mask
    matmul = M * IN * 1 + M * F32 + M * OUT * 4 + M * OUT * 2 + M * OUT * BF16  # out_row, row_stats, i32, f16, out
    assert _live_peak(lambda: layer(x), x, *layer.buffers()) == max(quant, matmul)


def test_int8_backward_dequantises_the_weight():
    """MatMul8bitLt.backward: CB.to(bfloat16, copy=True) [OUT, IN]; SCB/127 [OUT, 1] f32 is freed once multiplied
    in; then grad_x [M, IN] bf16 beside the dequantised weight."""
    layer, x = _int8_layer()
    y = layer(x)
    grad = torch.empty_like(y)
    peak = _live_peak(lambda: y.backward(grad), x, y, grad, *layer.buffers(), *layer.parameters())
    assert peak == OUT * IN * BF16 + M * IN * BF16


# -- older bitsandbytes releases (--bnb-version, memgraph/facts/bitsandbytes.py) ------------------------------

def _old_layer(version):
    with torch.device("meta"):
        return Linear4bitStandIn(torch.nn.Linear(IN, OUT, bias=False, dtype=torch.bfloat16), torch.bfloat16,
                                 bnb_version=version)


@pytest.mark.parametrize("rows", [M, 4])
def test_before_050_the_forward_always_dequantises(rows):
    """bitsandbytes 0.42 MatMul4Bit.forward: F.linear(A, dequantize_4bit(B).to(A.dtype).t()) for any row count
    (no fused kernel for a training input): dequantize_4bit's float32 absmax [BLOCKS] (+= offset in place) is
    freed when it returns, before F.linear: the peak is the bf16 weight [OUT, IN] beside the larger of the
    absmax and the output [rows, OUT] bf16 (rows = 4: the absmax's 8 KiB; rows = 2048: the output's 2 MiB)."""
    layer = _old_layer("0.42")
    x = torch.empty(rows, IN, dtype=torch.bfloat16, device="meta")
    expected = OUT * IN * BF16 + max(BLOCKS * F32, rows * OUT * BF16)
    assert _live_peak(lambda: layer(x), x, *layer.buffers()) == expected


@pytest.mark.parametrize("version, kept", [("0.41", True), ("0.43", True), ("0.44", False), ("0.50", False)])
def test_before_044_the_input_lives_as_long_as_the_graph(version, kept):
    """MatMul4Bit's ctx.tensors = (A, B) up to 0.43 (bitsandbytes PR #1270 made it (None, B) in 0.44): the layer
    input survives its last Python reference and the backward, and goes with the graph (the output y)."""
    import weakref

    layer = _old_layer(version)
    base = torch.empty(M, IN, dtype=torch.bfloat16, device="meta", requires_grad=True)
    inp = base * 2  # the layer's input, requiring grad (made by an op, as a block output is)
    alive = weakref.ref(inp)
    y = layer(inp)
    del inp
    assert (alive() is not None) == kept
    y.backward(torch.empty_like(y))
    assert (alive() is not None) == kept  # not released after backward: ctx.tensors is no saved tensor
    del y
    assert alive() is None


def test_an_input_that_needs_no_grad_is_not_kept():
    """needs_input_grad[0] False (the first layer's input before any adapter): ctx.tensors = (None, None)."""
    import weakref

    layer = _old_layer("0.42")
    inp = torch.empty(M, IN, dtype=torch.bfloat16, device="meta") * 2
    alive = weakref.ref(inp)
    y = layer(inp)
    del inp
    assert alive() is None and y.shape == (M, OUT)


def test_bnb_version_needs_a_4bit_quantize():
    from memgraph.errors import MemgraphError
    from memgraph.model_spec.options import TrainingOptions

    with pytest.raises(MemgraphError, match="--bnb-version 0.42 changes the 4-bit path only"):
        TrainingOptions(lora_rank=4, bnb_version="0.42")
    with pytest.raises(MemgraphError, match="--bnb-version 0.42 changes the 4-bit path only"):
        TrainingOptions(lora_rank=4, quantize="8bit", bnb_version="0.42")
    assert TrainingOptions(lora_rank=4, quantize="nf4", bnb_version="0.42", precision="bf16").bnb_version == "0.42"


def test_bnb_042_keeps_every_4bit_input_of_a_traced_step():
    """tiny-llama (2 layers, hidden 64, intermediate 128, tests/configs/tiny-llama.json), batch 1 x 32 tokens,
    LoRA on q_proj and v_proj, bf16: under 0.42 the inputs of the 4-bit layers that require grad stay alive
    past their last use. Layer 0's q/k/v input (the first norm's output) needs no grad (nothing trainable
    before it), so it is not kept; layer 0's o_proj, gate/up (shared input) and down_proj inputs are, and all
    of layer 1's: q/k/v (shared) 32x64, o_proj 32x64, gate/up 32x64, down 32x128, each 512-byte rounded
    (32 * 64 * 2 = 4096 B, 32 * 128 * 2 = 8192 B). lm_head is not quantised."""
    kw = dict(seq_len=32, lora_rank=4, quantize="nf4", precision="bf16", gpu="h100-80gb", optimizer="sgd",
              no_kbit_preparation=True)  # bitsandbytes' own retention, without PEFT's checkpointing
    new = analyze(str(CONFIGS / "tiny-llama.json"), **kw)
    old = analyze(str(CONFIGS / "tiny-llama.json"), bnb_version="0.42", **kw)
    layer0 = 4096 + 4096 + 8192  # o_proj, gate/up, down inputs
    layer1 = 4096 + 4096 + 4096 + 8192  # q/k/v, o_proj, gate/up, down inputs
    assert old.steady_state_peak.bytes - new.steady_state_peak.bytes <= layer0 + layer1
    assert old.steady_state_peak.bytes > new.steady_state_peak.bytes
