"""LLaVA training stages: which parameters train, and what that costs, by hand.

tiny-llava (tests/configs/tiny-llava.json): the projector is Linear(48 -> 64) + GELU + Linear(64 -> 64),
48*64 + 64 + 64*64 + 64 = 7296 parameters; the language model is a 2-layer Llama (hidden 64,
4 heads of 16, 2 KV heads, MLP 128, vocab 1000) with an untied lm_head.
"""

import pytest

from memgraph.api import analyze
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.model_spec.build import build_model
from tests.conftest import CONFIGS

LLAVA = str(CONFIGS / "tiny-llava.json")
PROJECTOR = 48 * 64 + 64 + 64 * 64 + 64
# per layer: q 64x64, k and v 64x32 each, o 64x64, gate/up 64x128 each, down 128x64, two RMSNorm weights
LAYER = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64
LANGUAGE_MODEL = 1000 * 64 + 2 * LAYER + 64 + 64 * 1000  # embed, layers, final norm, lm_head


def _trainable(**kw) -> dict[str, int]:
    model = build_model(resolve(LLAVA), TrainingOptions(target="cpu", **kw), "meta")
    out: dict[str, int] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            group = ("projector" if "multi_modal_projector" in name else
                     "vision" if "vision_tower" in name else "language")
            out[group] = out.get(group, 0) + p.numel()
    return out


def test_stage_1_trains_only_the_projector():
    assert _trainable(stage="1") == {"projector": PROJECTOR}


def test_stage_2_trains_projector_and_language_model():
    assert _trainable(stage="2") == {"projector": PROJECTOR, "language": LANGUAGE_MODEL}


def test_full_and_no_stage_train_everything():
    full = _trainable(stage="full")
    assert full == _trainable() and set(full) == {"projector", "language", "vision"}


def test_patterns_narrow_the_stage():
    # --train narrows stage 2 to the projector and layer 1; --freeze then removes the projector's second linear
    got = _trainable(stage="2", train=("model.multi_modal_projector.*", "model.language_model.layers.1.*"),
                     freeze=("model.multi_modal_projector.linear_2.*",))
    assert got == {"projector": 48 * 64 + 64, "language": LAYER}


def test_stage_1_costs_by_hand():
    """Gradients and AdamW state exist for the projector alone: 7296 float32 each, two moments."""
    r = analyze(LLAVA, batch_size=1, seq_len=32, optimizer="adamw", stage="1", target="cpu")
    rows = {row.modality: row for row in r.modalities}
    assert rows["projector"].trainable_parameters == PROJECTOR
    assert sum(row.trainable_parameters for row in r.modalities) == PROJECTOR
    assert rows["projector"].gradient_bytes == PROJECTOR * 4
    # exp_avg and exp_avg_sq, and the four float32 `step` counters: the default for a transformers model is the
    # Trainer's fused AdamW, and torch/optim/adam.py makes `step` a device tensor when fused (a host scalar otherwise)
    assert rows["projector"].optimizer_state_bytes == 2 * PROJECTOR * 4 + 4 * 4
    assert sum(row.gradient_bytes for row in r.modalities) == PROJECTOR * 4


def test_bad_stage_and_single_tower_model():
    with pytest.raises(MemgraphError, match="unknown stage '3'"):
        TrainingOptions(stage="3")
    with pytest.raises(MemgraphError, match="--stage 1 trains the projector"):
        build_model(resolve(str(CONFIGS / "tiny-llama.json")), TrainingOptions(stage="1", target="cpu"), "meta")
