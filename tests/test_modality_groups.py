"""Modality groups: which modality each module path of a multimodal model belongs to.

(The per-modality rows of a report adding up to its totals: tests/test_modality_table.py.)
"""

import json

import torch

from memgraph.model_spec.build import build_model
from memgraph.model_spec.modality import modality_of, module_modalities
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.tracer import trace_training
from tests.conftest import CONFIGS


def _modalities(name: str) -> dict[str, str]:
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    spec = resolve(str(CONFIGS / f"{name}.json"))
    opts = TrainingOptions(target="cpu")
    assert data["architectures"][0] == spec.model_class
    return module_modalities(build_model(spec, opts, "meta"))


def _top(m: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in m.items() if k.count(".") <= 1}


def test_modalities_tiny_llava():
    m = _modalities("tiny-llava")
    assert _top(m) == {
        "": "shared", "model": "shared", "model.vision_tower": "vision encoder",
        "model.multi_modal_projector": "projector", "model.language_model": "language model",
        "lm_head": "language model",
    }
    assert m["model.vision_tower.encoder.layers.0.mlp.fc1"] == "vision encoder"
    assert m["model.multi_modal_projector.linear_1"] == "projector"
    assert modality_of("model.language_model.layers.1.self_attn.q_proj", m) == "language model"


def test_modalities_tiny_qwen2_vl():
    m = _modalities("tiny-qwen2-vl")
    assert m["model.visual"] == m["model.visual.blocks"] == "vision encoder"
    assert m["model.visual.merger"] == "projector"  # inside the tower, found by its role (rule 5)
    assert m["model.language_model"] == m["lm_head"] == "language model"
    assert m["model"] == m[""] == "shared"


def test_modalities_tiny_clip():
    m = _modalities("tiny-clip")
    assert {k: v for k, v in m.items() if "." not in k} == {
        "": "shared", "text_model": "text encoder", "vision_model": "vision encoder",
        "text_projection": "text encoder", "visual_projection": "vision encoder",
    }
    assert all(v == "text encoder" for k, v in m.items() if k.startswith("text_model"))
    assert all(v == "vision encoder" for k, v in m.items() if k.startswith("vision_model"))


def test_modalities_tiny_siglip():
    # SigLIP's heads live inside the towers (text_model.head, vision_model.head); logit_scale/bias on the root
    m = _modalities("tiny-siglip")
    assert {k: v for k, v in m.items() if "." not in k} == {
        "": "shared", "text_model": "text encoder", "vision_model": "vision encoder"}
    assert m["text_model.head"] == "text encoder" and m["vision_model.head"] == "vision encoder"


def test_modalities_tiny_whisper():
    m = _modalities("tiny-whisper")
    assert m["model.encoder"] == m["model.encoder.layers.0.fc1"] == "audio encoder"
    assert m["model.decoder"] == m["model.decoder.embed_tokens"] == "text decoder"
    assert m["proj_out"] == "text decoder"
    assert m[""] == m["model"] == "shared"


def test_modalities_single_tower_and_callable():
    assert set(_modalities("tiny-llama").values()) == {"language model"}
    assert set(_modalities("tiny-vit").values()) == {"vision encoder"}
    assert set(module_modalities(torch.nn.Sequential(torch.nn.Linear(2, 2))).values()) == {"model"}


def test_trace_stores_modalities():
    spec = resolve(str(CONFIGS / "tiny-llava.json"))
    t = trace_training(spec, TrainingOptions(batch_size=1, seq_len=32, target="cpu", optimizer="sgd"))
    assert t.modalities["model.multi_modal_projector"] == "projector"
    modules = {o.module for o in t.log.ops}
    assert {modality_of(p, t.modalities) for p in modules} >= {"vision encoder", "projector", "language model"}


def test_a_tower_as_wide_as_the_decoder_has_no_projector_inside():
    # Pix2Struct: vision encoder and text decoder both 768 wide (Pix2StructConfig defaults, pix2struct-base), so the
    # encoder's embeddings (its input embeddings) and its encoder stack (a module with a config of its own) end at
    # the decoder's width; neither is a projector, and the model has none
    import transformers

    cfg = transformers.Pix2StructConfig()
    cfg.vision_config.num_hidden_layers = cfg.text_config.num_layers = 1
    assert cfg.vision_config.hidden_size == cfg.text_config.hidden_size == 768
    with torch.device("meta"):
        m = module_modalities(transformers.Pix2StructForConditionalGeneration(cfg))
    assert m["encoder"] == m["encoder.embeddings"] == m["encoder.encoder"] == "vision encoder"
    assert m["decoder"] == m["decoder.lm_head"] == "language model"
    assert "projector" not in set(m.values())
