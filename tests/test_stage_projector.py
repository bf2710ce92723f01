"""Stages find the projector by its role, also inside the vision tower (Qwen2-VL's merger), by hand.

tiny-qwen2-vl (tests/configs/tiny-qwen2-vl.json): the vision tower works at embed_dim 32 and merges
2x2 patches (spatial_merge_size 2), so the merger (PatchMerger) is
LayerNorm(32) + Linear(128 -> 128) + GELU + Linear(128 -> 64): 2*32 + (128*128 + 128) + (128*64 + 64)
= 64 + 16512 + 8256 = 24832 parameters, and it ends at the language model's hidden size 64.
The language model is a 2-layer Qwen2 (hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocab 1000,
q/k/v with biases) with an untied lm_head.
"""

from memgraph.model_spec.build import build_model
from memgraph.model_spec.modality import PROJECTOR, module_modalities
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS

QWEN2_VL = str(CONFIGS / "tiny-qwen2-vl.json")
MERGER = 2 * 32 + (128 * 128 + 128) + (128 * 64 + 64)
# per layer: q 64x64 + 64, k and v 64x32 + 32 each, o 64x64, gate/up 64x128 each, down 128x64, two RMSNorms
LAYER = (64 * 64 + 64) + 2 * (64 * 32 + 32) + 64 * 64 + 3 * 64 * 128 + 2 * 64
LANGUAGE_MODEL = 1000 * 64 + 2 * LAYER + 64 + 64 * 1000  # embed, layers, final norm, lm_head


def _trainable(stage: str) -> dict[str, int]:
    model = build_model(resolve(QWEN2_VL), TrainingOptions(target="cpu", stage=stage), "meta")
    return {name: p.numel() for name, p in model.named_parameters() if p.requires_grad}


def test_the_merger_inside_the_vision_tower_is_the_projector():
    model = build_model(resolve(QWEN2_VL), TrainingOptions(target="cpu"), "meta")
    groups = module_modalities(model)
    assert groups["model.visual.merger"] == PROJECTOR
    assert groups["model.visual.merger.mlp.2"] == PROJECTOR  # its submodules follow it
    assert groups["model.visual.blocks"] == "vision encoder"  # the rest of the tower does not


def test_stage_1_trains_exactly_the_merger():
    trained = _trainable("1")
    assert set(trained) == {f"model.visual.merger.{p}" for p in
                            ("ln_q.weight", "ln_q.bias", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias")}
    assert sum(trained.values()) == MERGER == 24832


def test_stage_2_adds_the_language_model_and_keeps_the_vision_blocks_frozen():
    trained = _trainable("2")
    assert sum(trained.values()) == MERGER + LANGUAGE_MODEL == 24832 + 202304
    assert not any(name.startswith(("model.visual.blocks", "model.visual.patch_embed")) for name in trained)
