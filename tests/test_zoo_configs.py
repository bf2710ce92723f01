"""Checks for the built-in model zoo (models/*.json).

Every zoo entry must follow the schema, build offline on the ``meta`` device through
memgraph's own path (``resolve`` + ``build_model``), and have exactly ``published_params``
parameters.  The exact counts below were measured with transformers 5.23 and cross-checked
against public figures (model cards, hub parameter badges, checkpoint ``total_size``); the
built count must also land within ``CARD_TOLERANCE`` of the rounded card figure.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from memgraph.model_spec.build import build_model
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
MODEL_FILES = sorted(MODELS_DIR.glob("*.json"))
MODEL_IDS = [p.stem for p in MODEL_FILES]

SCHEMA_KEYS = {
    "name", "hf_id", "family", "task", "model_class", "defaults",
    "published_params", "notes", "config",
}

FAMILIES = {
    "decoder-lm", "encoder", "encoder-decoder", "vision", "cnn", "clip", "speech",
    "vision-language", "audio-language",
}
TASKS = {
    "causal-lm", "masked-lm", "seq2seq-lm", "image-classification", "contrastive",
    "speech-seq2seq", "image-text-to-text", "audio-text-to-text",
}
# Which task each family may declare.
FAMILY_TASKS = {
    "decoder-lm": {"causal-lm"},
    "encoder": {"masked-lm"},
    "encoder-decoder": {"seq2seq-lm"},
    "vision": {"image-classification"},
    "cnn": {"image-classification"},
    "clip": {"contrastive"},
    "speech": {"speech-seq2seq"},
    "vision-language": {"image-text-to-text"},
    "audio-language": {"audio-text-to-text"},
}
# min_pixels / max_pixels: a pixel-budget processor's figures from the checkpoint's preprocessor_config.json
DEFAULT_KEYS = {"seq_len", "image_size", "target_len", "audio_seconds", "images", "min_pixels", "max_pixels"}
# The inputs each family needs a default for.
FAMILY_DEFAULTS = {
    "decoder-lm": {"seq_len"},
    "encoder": {"seq_len"},
    "encoder-decoder": {"seq_len", "target_len"},
    "vision": {"image_size"},
    "cnn": {"image_size"},
    "clip": {"seq_len", "image_size"},
    "speech": {"audio_seconds", "target_len"},
    "vision-language": {"seq_len", "image_size", "images"},
    "audio-language": {"seq_len", "audio_seconds"},
}

# Exact sum(p.numel() for p in model.parameters()) measured on meta with
# transformers 5.23.0 (tied/shared tensors counted once).
EXPECTED_PARAMS = {
    "bert-base-uncased": 109_514_298,
    "bert-large-uncased": 335_174_458,
    "clip-vit-large-patch14-336": 427_944_193,
    "gpt2": 124_439_808,
    "llama-2-70b": 68_976_648_192,
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "llama-3.1-405b": 405_853_388_800,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-11b-vision": 10_670_220_835,
    "llava-1.5-13b": 13_351_494_656,
    "llava-1.5-7b": 7_063_427_072,
    # mistral-7b 7_241_732_096 + 2 x 64 x 4_096 (vocab 32_000 -> 32_064, embedding and head) + llava-1.5-7b's CLIP
    # tower and projector (7_063_427_072 - llama-2-7b 6_738_415_616 - 524_288 = 324_487_168) + image_newline 4_096
    "llava-next-7b": 7_566_747_648,
    # llava-1.5-7b + LLaVA-NeXT's image_newline (hidden 4096): 7_063_427_072 + 4_096
    "llava-next-video-7b": 7_063_431_168,
    "mistral-7b": 7_241_732_096,
    "pixtral-12b": 12_682_739_712,  # by hand: text 12_247_782_400 + vision 403_489_792 + projector 31_467_520
    "qwen2-audio-7b": 8_397_094_912,
    "qwen2-vl-2b": 2_208_985_600,
    "qwen2-vl-7b": 8_291_375_616,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-vl-7b": 8_292_166_656,
    "resnet-50": 25_557_032,
    "siglip-base": 203_155_970,
    "t5-base": 222_903_552,
    "vit-base-patch16-224": 86_567_656,
    "whisper-large-v3": 1_543_490_560,
    "whisper-small": 241_734_912,
}

# Rounded public figures (model card / paper / hub badge).  Papers round loosely
# and count slightly different heads (e.g. BERT's 110M/340M is BertModel with the
# pooler, not BertForMaskedLM; Llama-2-70B is "70B" for 68.98B), so the exact
# count only has to land within CARD_TOLERANCE of these.
CARD_FIGURES = {
    "bert-base-uncased": 110e6,
    "bert-large-uncased": 340e6,
    "clip-vit-large-patch14-336": 428e6,
    "gpt2": 124e6,
    "llama-2-70b": 70e9,
    "llama-2-7b": 6.74e9,
    "llama-3-8b": 8.03e9,
    "llama-3.1-405b": 405e9,
    "llama-3.2-1b": 1.24e9,
    "llama-3.2-11b-vision": 10.6e9,  # model card of meta-llama/Llama-3.2-11B-Vision
    "llava-1.5-13b": 13.4e9,
    "llava-1.5-7b": 7.06e9,
    "llava-next-7b": 7.57e9,  # hub badge of llava-hf/llava-v1.6-mistral-7b-hf
    "llava-next-video-7b": 7.06e9,  # hub badge of llava-hf/LLaVA-NeXT-Video-7B-hf
    "mistral-7b": 7.24e9,
    "pixtral-12b": 12.4e9,  # Mistral: "12B parameter multimodal decoder + 400M parameter vision encoder"
    "qwen2-audio-7b": 8.4e9,  # hub badge of Qwen/Qwen2-Audio-7B-Instruct
    "qwen2-vl-2b": 2.21e9,
    "qwen2-vl-7b": 8.29e9,
    "qwen2.5-0.5b": 0.49e9,
    "qwen2.5-7b": 7.61e9,
    "qwen2.5-vl-7b": 8.29e9,  # hub badge of Qwen/Qwen2.5-VL-7B-Instruct
    "resnet-50": 25.6e6,
    "siglip-base": 203e6,
    "t5-base": 220e6,
    "vit-base-patch16-224": 86e6,
    "whisper-large-v3": 1550e6,
    "whisper-small": 244e6,
}
CARD_TOLERANCE = 0.02
# Cards whose figure is a sum of two rounded parts: Pixtral's "12B decoder" is Mistral NeMo (12.25B exact: its
# untied 131072 x 5120 embedding and head alone are 1.34B), so 12B + 0.4B sits 2.3% under the exact count.
CARD_TOLERANCE_FOR = {"pixtral-12b": 0.025}

REQUIRED_MODELS = set(EXPECTED_PARAMS)


@functools.lru_cache(maxsize=None)
def load_entry(name: str) -> dict:
    with open(MODELS_DIR / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)


@functools.lru_cache(maxsize=None)
def built_param_count(name: str) -> int:
    """Build the zoo entry once on meta, as ``memgraph analyze NAME`` does, and count its parameters."""
    model = build_model(resolve(name), TrainingOptions(target="cpu"), "meta")
    params = list(model.parameters())
    assert all(p.device.type == "meta" for p in params), "a parameter was materialised off meta"
    return sum(p.numel() for p in params)


def test_zoo_is_complete():
    assert set(MODEL_IDS) == REQUIRED_MODELS


@pytest.mark.parametrize("name", MODEL_IDS)
def test_schema(name):
    entry = load_entry(name)
    assert set(entry) == SCHEMA_KEYS
    assert entry["name"] == name
    for key in ("hf_id", "model_class", "notes"):
        assert isinstance(entry[key], str) and entry[key].strip(), key
    assert "/" in entry["hf_id"]
    assert entry["family"] in FAMILIES
    assert entry["task"] in TASKS
    assert entry["task"] in FAMILY_TASKS[entry["family"]]

    published = entry["published_params"]
    assert isinstance(published, int) and not isinstance(published, bool)
    assert published > 0

    defaults = entry["defaults"]
    assert isinstance(defaults, dict)
    assert set(defaults) <= DEFAULT_KEYS
    assert FAMILY_DEFAULTS[entry["family"]] <= set(defaults)
    for key, value in defaults.items():
        if key == "audio_seconds":
            assert isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        else:
            assert isinstance(value, int) and not isinstance(value, bool) and value > 0, key

    config = entry["config"]
    assert isinstance(config, dict)
    assert isinstance(config.get("model_type"), str)
    assert config["model_type"] in CONFIG_MAPPING
    assert hasattr(transformers, entry["model_class"])


@pytest.mark.parametrize("name", MODEL_IDS)
def test_param_count_matches_published(name):
    entry = load_entry(name)
    count = built_param_count(name)
    assert count == EXPECTED_PARAMS[name]
    assert entry["published_params"] == count
    card = CARD_FIGURES[name]
    assert abs(count - card) / card <= CARD_TOLERANCE_FOR.get(name, CARD_TOLERANCE), (count, card)


def test_mllama_image_token_in_the_extra_embedding_rows_is_accepted():
    """Llama 3.2 Vision's released config puts image_token_index 128256 at vocab_size 128256: MllamaTextModel
    embeds vocab_size + 8 rows (128256 + 8 = 128264), so ids 0 .. 128263 index it and 128264 does not."""
    from memgraph.errors import MemgraphError
    from memgraph.model_spec.config_checks import check_token_ids

    entry = load_entry("llama-3.2-11b-vision")
    assert entry["config"]["image_token_index"] == 128256 == entry["config"]["text_config"]["vocab_size"]
    check_token_ids(dict(entry["config"]), "zoo")  # accepted: 128256 < 128264
    check_token_ids({"image_token_index": 128263, "text_config": {"vocab_size": 128256}}, "x", model_type="mllama")
    with pytest.raises(MemgraphError, match="from 0 to 128,263"):
        check_token_ids({"image_token_index": 128264, "text_config": {"vocab_size": 128256}}, "x",
                        model_type="mllama")
    with pytest.raises(MemgraphError, match="from 0 to 128,255"):  # no extra rows for another model type
        check_token_ids({"image_token_index": 128256, "text_config": {"vocab_size": 128256}}, "x",
                        model_type="llava")
