"""``--quantize 4bit``: the parameters line and the per-module table count the model's parameters, not the packed
uint8 elements bitsandbytes stores (two 4-bit values per byte), with the stored bytes beside the count."""

from pathlib import Path

from memgraph.api import analyze
from memgraph.model_spec.options import TrainingOptions
from memgraph.render.text import render_table

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")  # hidden 64, MLP 128, 2 layers, 4/2 heads, vocab 1000

# by hand: head_dim 64 / 4 = 16, k and v project to 2 * 16 = 32
LINEARS = 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128  # q, k, v, o; gate, up, down = 36,864 (quantised)
LAYER = LINEARS + 2 * 64  # + two RMSNorm weights = 36,992
LORA = (16 * 64 + 64 * 16) * 2 + (16 * 64 + 32 * 16) * 2 + (16 * 64 + 128 * 16) * 2 + (16 * 128 + 64 * 16)  # 16,384
MODEL = 2 * LAYER + 1000 * 64 + 64 + 1000 * 64  # embeddings, final norm, untied lm_head (kept unquantised) = 202,048


def test_4bit_counts_the_models_parameters_with_the_stored_bytes_beside():
    r = analyze(TINY, TrainingOptions(seq_len=32, gpu="a100-40gb", quantize="4bit", lora_rank=16,
                                      lora_targets="all-linear", precision="bf16"))
    assert (LORA, MODEL) == (16_384, 202_048)
    assert (r.parameters, r.trainable_parameters) == (MODEL + 2 * LORA, 2 * LORA)  # 234,816; packed: 197,952
    layer0 = [m for m in r.modules if m.module.startswith("model.layers.0.")]  # the table's row at depth 3
    assert sum(m.parameters for m in layer0) == LAYER + LORA  # 53,376
    assert sum(m.trainable_parameters for m in layer0) == LORA
    q = next(m for m in r.modules if m.module == "model.layers.0.self_attn.q_proj.base_layer")
    assert q.parameters == 64 * 64  # 4,096 values in 2,048 stored bytes
    line = next(s for s in render_table(r).splitlines() if s.startswith("parameters:"))
    assert line.startswith("parameters: 234,816 (32,768 trainable), stored in ")
    assert line.endswith("(bitsandbytes packs two 4-bit values per byte)")


def test_unquantised_parameters_line_is_unchanged():
    r = analyze(TINY, TrainingOptions(seq_len=32, gpu="a100-40gb"))
    assert r.parameters == MODEL
    assert f"parameters: {MODEL:,} ({MODEL:,} trainable)\n" in render_table(r)
