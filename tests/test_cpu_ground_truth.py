"""The cpu target against the real CPU allocator (memgraph measure --device cpu), measured live.

Tolerance: 2% of the measured steady-state peak, the bound the product promises for fp32 on
the cpu target. Both runs execute the same step function; what differs is that the
prediction runs on meta, so kernel-internal scratch buffers must come from the op registry.
Measured on this CPU build, the configs without convolutions agree to within 0.5%.

Every live CPU measurement of a tiny config lives here, once per configuration (slow: each runs
a real training step; `python -m pytest --full`). The stored records in reports/groundtruth/cpu
are checked by tests/test_validation.py.
"""

import pytest

from memgraph.api import analyze, measure
from tests.conftest import CONFIGS

pytestmark = pytest.mark.slow

TOLERANCE = 0.02

FAMILIES = {
    "tiny-llama": dict(seq_len=32),  # decoder LM (GQA, RoPE)
    "tiny-gpt2": dict(seq_len=32),  # decoder LM
    "tiny-bert": dict(seq_len=32),  # encoder (masked LM)
    "tiny-t5": dict(seq_len=32, target_len=16),  # encoder-decoder
    "tiny-vit": dict(),  # ViT image classification
    "tiny-resnet": dict(image_size=32),  # CNN
    "tiny-clip": dict(seq_len=16),  # two towers, contrastive loss
    "tiny-siglip": dict(seq_len=16),  # two towers, sigmoid loss
    "tiny-whisper": dict(audio_seconds=1.0, target_len=16),  # speech encoder-decoder
}


def _measured(model: str, **kw) -> int:
    """The CPU allocator's steady-state peak: the highest iteration from the second on."""
    return max(it["peak_allocated"] for it in measure(model, device="cpu", **kw)["iterations"][1:])


@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_cpu_prediction_within_2_percent(family, optimizer, batch_size):
    model = str(CONFIGS / f"{family}.json")
    kw = dict(FAMILIES[family], batch_size=batch_size, optimizer=optimizer, target="cpu")
    r = analyze(model, **kw)
    predicted, measured = r.steady_state_peak.bytes, _measured(model, **kw)
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)
    assert r.ops["unknown"] == {}  # every op of the step is in the registry (kernel workspaces reviewed)


@pytest.mark.parametrize("family", ["tiny-llama", "tiny-t5"])
def test_trainer_loop_within_2_percent_and_below_plain(family):
    """--loop trainer drops the outputs (logits, KV cache) before backward: same bound, smaller peak."""
    model = str(CONFIGS / f"{family}.json")
    kw = dict(FAMILIES[family], batch_size=8, optimizer="sgd", target="cpu")
    trainer = analyze(model, loop="trainer", **kw).steady_state_peak.bytes
    measured = _measured(model, loop="trainer", **kw)
    assert abs(trainer - measured) <= TOLERANCE * measured, (trainer, measured)
    assert trainer < analyze(model, loop="plain", **kw).steady_state_peak.bytes


# -- multimodal: processor-like inputs and shadow values on the real allocator ----------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_tiny_llava_two_images_within_2_percent(optimizer):
    model = str(CONFIGS / "tiny-llava.json")
    kw = dict(batch_size=2, seq_len=64, images=2, optimizer=optimizer, target="cpu")
    r = analyze(model, **kw)
    assert "pixel_values=float32[4,3,32,32]" in r.batch  # 2 samples x 2 images
    predicted, measured = r.steady_state_peak.bytes, _measured(model, **kw)
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_tiny_qwen2_vl_within_2_percent(optimizer):
    model = str(CONFIGS / "tiny-qwen2-vl.json")
    kw = dict(batch_size=2, seq_len=64, images=2, image_size=(56, 84), optimizer=optimizer, target="cpu")
    r = analyze(model, **kw)
    assert "image_grid_thw=int64[4,3]" in r.batch  # one (t, h, w) row per image
    predicted, measured = r.steady_state_peak.bytes, _measured(model, **kw)
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)
