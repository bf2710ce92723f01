"""Issue 13's input recipes: image-text models of any family with a fixed image size (image tokens counted by the
model's own get_image_features), speech encoder-decoders other than Whisper (their feature extractor), and tiny
configs that keep architectures valid. Hand-computed layouts here; live CPU comparisons marked slow."""

import pytest
import torch

from tools.coverage import _spec_and_options, run_one, tiny_config
from memgraph.errors import MemgraphError
from memgraph.model_spec.image_tokens import image_tokens_per_image
from memgraph.model_spec.multimodal_inputs import IGNORE_INDEX, NoImageTextLayout, layout_of
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec


def _batch(model_type: str, task: str, class_name: str, **kw):
    spec = ModelSpec(name=model_type, source="config", task=task, config=tiny_config(model_type), model_class=class_name)
    return spec, {s.name: s for s in spec.batch(TrainingOptions(target="cpu", **kw), torch.float32).inputs}


def test_aya_vision_layout_by_hand():
    """Aya Vision: SigLIP patches pixel-shuffled by downsample_factor before the projector
    (modeling_aya_vision.py pixel_shuffle): (32/8)^2 = 16 patches / 2^2 = 4 tokens per image."""
    spec, b = _batch("aya_vision", "image-text-to-text", "AyaVisionForConditionalGeneration",
                     batch_size=2, seq_len=20, images=2)
    cfg = spec.config
    v = cfg.vision_config
    assert (v.image_size, v.patch_size, cfg.downsample_factor) == (32, 8, 2)
    per_image = (32 // 8) ** 2 // 2 ** 2
    assert image_tokens_per_image(cfg, 3, 32, 32).tokens == per_image == 4
    assert b["pixel_values"].shape == (4, 3, 32, 32)  # 2 samples x 2 images
    ids, labels = b["input_ids"].value(), b["labels"].value()
    image = ids == cfg.image_token_id
    assert image.sum(1).tolist() == [2 * per_image] * 2
    assert image[:, 1:1 + per_image].all() and not image[:, 1 + per_image].any()  # [BOS] [image]*4 [text] [image]*4
    assert (labels[image] == IGNORE_INDEX).all() and (labels[~image] == ids[~image]).all()
    assert ids.max() < cfg.text_config.vocab_size
    assert "token_type_ids" not in b  # AyaVisionForConditionalGeneration.forward takes none


def test_gemma3_layout_by_hand():
    """Gemma 3: the patch grid average-pooled to mm_tokens_per_image (16 patches of 8 px in a 32-px image, pooled
    with kernel 4 / sqrt(16) = 1: 16 tokens); token_type_ids 1 on the image tokens, as its processor makes them."""
    spec, b = _batch("gemma3", "image-text-to-text", "Gemma3ForConditionalGeneration", batch_size=1, seq_len=24)
    cfg = spec.config
    assert cfg.mm_tokens_per_image == (32 // 8) ** 2 == 16  # shrunk from 256 (coverage._shrink)
    ids, types = b["input_ids"].value(), b["token_type_ids"].value()
    assert (ids == cfg.image_token_id).sum().item() == 16
    assert types.eq((ids == cfg.image_token_id).long()).all()
    assert b["pixel_values"].shape == (1, 3, 32, 32)


def test_qwen3_vl_grid_by_hand():
    """Qwen3-VL (16-px patches, merge 2): 56 px rounds to 64 (multiples of 32), a 4x4 grid, 4 visual tokens."""
    spec, b = _batch("qwen3_vl", "image-text-to-text", "Qwen3VLForConditionalGeneration", batch_size=1, seq_len=24,
                     image_size=56)
    assert layout_of(spec.config) == "grid"
    assert b["image_grid_thw"].value().tolist() == [[1, 4, 4]]
    v = spec.config.vision_config
    assert b["pixel_values"].shape == (16, 3 * v.temporal_patch_size * 16 * 16)


def test_unknown_layout_is_refused_with_its_reason():
    # DiffusionGemma: its block-diffusion head takes images only as precomputed mm_encoder_outputs and returns no
    # loss (BLIP, Idefics (1) and UDOP, which this test used before, now have their layouts: vision_prefix_inputs.py,
    # image_attention_inputs.py, document_inputs.py)
    from transformers import AutoConfig

    try:
        AutoConfig.for_model("diffusion_gemma")
    except Exception:  # not in this transformers (the lower end of the supported range)
        pytest.skip("transformers has no diffusion_gemma")
    spec = ModelSpec(name="diffusion_gemma", source="config", task="image-text-to-text",
                     config=tiny_config("diffusion_gemma", with_vision=True), model_class="DiffusionGemmaForBlockDiffusion")
    with pytest.raises(NoImageTextLayout, match="has no training loss in transformers .* --input and --loss"):
        spec.batch(TrainingOptions(seq_len=32), torch.float32)


def test_fixed_size_refuses_another_image_size():
    with pytest.raises(MemgraphError, match="--image-size 32"):
        _batch("paligemma", "image-text-to-text", "PaliGemmaForConditionalGeneration", seq_len=40, image_size=64)


def test_speech_to_text_features_by_hand():
    """Speech2TextFeatureExtractor: 16 kHz, 25 ms windows (400 samples) every 10 ms (160):
    1 s -> 1 + (16000 - 400) // 160 = 98 frames of 80 mel bins; labels [b, target_len]."""
    _, b = _batch("speech_to_text", "speech-seq2seq", "Speech2TextForConditionalGeneration", batch_size=2,
                  audio_seconds=1.0, target_len=8)
    assert b["input_features"].shape == (2, 1 + (16000 - 400) // 160, 80)
    assert b["labels"].shape == (2, 8)
    assert "attention_mask" not in b  # all ones for one unpadded clip: left out, as for Whisper


def test_seamless_features_stack_two_frames():
    """SeamlessM4TFeatureExtractor stacks stride 2 frames of 80 bins: 98 frames -> 49 rows of 160 values."""
    _, b = _batch("seamless_m4t", "speech-seq2seq", "SeamlessM4TForSpeechToText", batch_size=1, audio_seconds=1.0,
                  target_len=8)
    assert b["input_features"].shape == (1, 49, 160)


def test_tiny_configs_stay_valid_by_hand():
    assert tiny_config("bit").num_groups == 4  # gcd(32, 4): the tiny widths are multiples of 4
    swin = tiny_config("swin")  # 32 px / 4-px patches = 8, merged 2x2 after each of 4 stages: 8, 4, 2, 1
    assert swin.window_size == 1
    qwen = tiny_config("qwen2_vl").get_text_config()  # [16, 24, 24] of 64 scaled to head_dim 16 / 2 = 8
    assert qwen.rope_parameters["mrope_section"] == [2, 3, 3]
    assert tiny_config("seamless_m4t").speech_encoder_layerdrop == 0.0
    llava = tiny_config("llava")
    assert llava.image_token_id < llava.text_config.vocab_size  # 32000 moved below the shrunk vocabulary


def test_cpu_sdpa_choice_sees_a_mask_that_requires_grad():
    from memgraph.trace.emulate.sdpa_kernels import cpu_sdpa_backend

    q = torch.empty(1, 2, 8, 16, device="meta", requires_grad=True)
    mask = torch.empty(1, 2, 8, 8, device="meta", requires_grad=True)
    # the CPU flash kernel has no gradient for attn_mask: PyTorch takes math (checked on real CPU tensors below)
    real = torch._fused_sdp_choice(torch.randn(1, 2, 8, 16, requires_grad=True), torch.randn(1, 2, 8, 16),
                                   torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 8, requires_grad=True))
    assert real == 0  # SDPBackend math
    assert cpu_sdpa_backend(q, q, q, mask, 0.0, False, None, False) == "math"
    assert cpu_sdpa_backend(q, q, q, mask.detach(), 0.0, False, None, False) == "flash"


# Live: the tiny step run for real on the CPU (memgraph measure --device cpu) against the cpu-target prediction.
# Tolerance 1%, the coverage report's: these dense fp32 steps are exact up to the CPU allocator's rounding.
@pytest.mark.slow
@pytest.mark.parametrize("task,model_type,class_name", [
    ("image-text-to-text", "aya_vision", "AyaVisionForConditionalGeneration"),  # LLaVA-style, pixel shuffle
    ("image-text-to-text", "paligemma", "PaliGemmaForConditionalGeneration"),  # another family: SigLIP + Gemma
    ("image-text-to-text", "glm4v", "Glm4vForConditionalGeneration"),  # grid layout beyond Qwen2-VL
    ("speech-seq2seq", "speech_to_text", "Speech2TextForConditionalGeneration"),  # log-mel, conv subsampler
    ("speech-seq2seq", "speecht5", "SpeechT5ForSpeechToText"),  # raw waveform input_values
    ("image-classification", "bit", "BitForImageClassification"),  # GroupNorm groups kept valid
    # the padding test on pixel values answered from ImageInput's no-zero fact (trace/shadow_values.py)
    ("image-text-to-text", "idefics3", "Idefics3ForConditionalGeneration"),
    ("image-text-to-text", "idefics2", "Idefics2ForConditionalGeneration"),  # same test, perceiver resampler
])
def test_recipe_within_1_percent_of_the_real_step(task, model_type, class_name):
    row = run_one(task, model_type, class_name)
    assert row.status == "ok", row.reason
    assert abs(row.error_pct) <= 1.0, (row.measured, row.predicted)


def test_coverage_options_for_grid_models():
    _, opts = _spec_and_options("image-text-to-text", "qwen2_vl", "Qwen2VLForConditionalGeneration")
    assert opts.image_size == 56 and opts.images == 1


def test_config_json_classes_find_their_recipe():
    """`memgraph analyze config.json` picks the task from architectures[0]: image-text and speech classes by
    transformers' auto mappings; a *ForCausalLM in the image-text mapping (Fuyu) stays a causal LM."""
    from memgraph.model_spec.tasks import task_for_class

    assert task_for_class("AyaVisionForConditionalGeneration") == "image-text-to-text"
    assert task_for_class("Speech2TextForConditionalGeneration") == "speech-seq2seq"
    assert task_for_class("FuyuForCausalLM") == "causal-lm"
    assert task_for_class("NoSuchModelForConditionalGeneration") is None


def test_idefics3_processor_rule_by_hand():
    """Idefics 3 reads pixel values back in get_image_features, so its count is the processor's rule
    (processing_idefics3.py): ((32 // 8) ** 2) / 2 ** 2 = 4 tokens; images as [samples, images, C, H, W]."""
    spec, b = _batch("idefics3", "image-text-to-text", "Idefics3ForConditionalGeneration", batch_size=2,
                     seq_len=24, images=2)
    assert spec.config.scale_factor == 2
    assert b["pixel_values"].shape == (2, 2, 3, 32, 32)
    assert (b["input_ids"].value() == spec.config.image_token_id).sum(1).tolist() == [2 * 4] * 2


def test_image_input_is_a_real_image_without_zeros():
    """ImageInput makes pixels as the Idefics processors do, 8-bit k normalised by mean 0.5 / std 0.5
    (image_processing_idefics3.py, IMAGENET_STANDARD_MEAN/STD): (k / 255 - 0.5) / 0.5; k = 0 -> -1, k = 255 -> 1,
    and k / 255 = 0.5 has no integer k, so no value is 0.0 (the fact declared to the trace)."""
    from memgraph.model_spec.multimodal_inputs import NO_ZERO, ImageInput

    spec = ImageInput("pixel_values", (2, 1, 3, 32, 32), torch.float32)
    x = spec.make("cpu", torch.Generator().manual_seed(0))
    assert x.shape == (2, 1, 3, 32, 32) and (x != 0).all()
    assert x.min() >= -1.0 and x.max() <= 1.0
    k = (x * 0.5 + 0.5) * 255
    assert torch.allclose(k, k.round(), atol=1e-4)  # 8-bit levels
    assert spec.value_facts() == (NO_ZERO,) and spec.make("meta").device.type == "meta"
