"""Video rows of the patch-grid families (multimodal_inputs.py ``_qwen2_vl`` with video_inputs.py's family rules)
and the image-text families fixed beside them (Aria, Granite Docling, Cohere Compass). Tiny configs of
tools/coverage.py: 56-px frames of the grid models resized up into Qwen2-VL's video budget (128 * 28 * 28 =
100,352 px minimum): smart_resize(56, 56) -> 336 x 336 px for 28-px factors."""

import pytest
import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX
from memgraph.model_spec.multimodal_inputs import qwen2_vl_video_grid
from memgraph.model_spec.options import TrainingOptions
from tools.coverage import _spec_and_options


def _spec(task, model_type, cls):
    from transformers import AutoConfig

    try:
        AutoConfig.for_model(model_type)
    except Exception:  # not in this transformers (the lower end of the supported range)
        pytest.skip(f"transformers has no {model_type}")
    return _spec_and_options(task, model_type, cls)


def _batch(task, model_type, cls):
    spec, opts = _spec(task, model_type, cls)
    return spec, opts, {s.name: s for s in spec.batch(opts, torch.float32).inputs}


def _runs(mask: torch.Tensor) -> list[int]:
    """Lengths of the runs of True in a 1-D mask."""
    out, n = [], 0
    for v in mask.tolist() + [False]:
        if v:
            n += 1
        elif n:
            out.append(n)
            n = 0
    return out


def test_glm4v_writes_a_video_as_image_token_groups_per_temporal_patch():
    spec, opts, b = _batch("video-text-to-text", "glm4v", "Glm4vForConditionalGeneration")
    cfg = spec.config
    gt, gh, gw, tokens = qwen2_vl_video_grid(cfg, 56, 4)
    # 4 frames in temporal patches of 2: 2 groups; each (gh * gw) / merge^2 tokens
    assert gt == 2 and tokens == gt * gh * gw // cfg.vision_config.spatial_merge_size ** 2
    ids, kind = b["input_ids"].value()[0], b["mm_token_type_ids"].value()[0]
    assert _runs(kind == 2) == [tokens // 2, tokens // 2]  # two groups, a timestamp between them
    assert (ids[kind == 2] == cfg.image_token_id).all()  # modeling_glm4v.py: video mask is the image mask
    assert not (ids == cfg.video_token_id).any()
    assert b["video_grid_thw"].value().tolist() == [[gt, gh, gw]]


@pytest.mark.parametrize("model_type, cls", [("qwen3_vl", "Qwen3VLForConditionalGeneration"),
                                             ("cohere_compass", "CohereCompassForConditionalGeneration")])
def test_qwen3_vl_style_video_groups_use_the_video_token(model_type, cls):
    spec, _, b = _batch("video-text-to-text", model_type, cls)
    gt, _, _, tokens = qwen2_vl_video_grid(spec.config, 56, 4)
    kind, ids = b["mm_token_type_ids"].value()[0], b["input_ids"].value()[0]
    assert _runs(kind == 2) == [tokens // gt] * gt == [tokens // 2] * 2
    assert (ids[kind == 2] == spec.config.video_token_id).all()
    assert (b["labels"].value()[0][kind == 2] == IGNORE_INDEX).all()


def test_qwen2_vl_keeps_one_video_group():
    spec, _, b = _batch("video-text-to-text", "qwen2_vl", "Qwen2VLForConditionalGeneration")
    _, _, _, tokens = qwen2_vl_video_grid(spec.config, 56, 4)
    assert _runs(b["mm_token_type_ids"].value()[0] == 2) == [tokens]


def test_ernie_merges_frames_in_its_resampler():
    spec, opts, b = _batch("video-text-to-text", "ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration")
    v = spec.config.vision_config
    assert v.temporal_merge_size == 2
    gt, gh, gw, tokens = qwen2_vl_video_grid(spec.config, 56, 4)
    # 4 frames kept (a multiple of 2), one row of patches per frame; tokens = 4 * gh * gw / 2^2 / 2
    assert gt == 4 and tokens == 4 * gh * gw // 4 // 2
    assert b["pixel_values_videos"].shape[0] == 4 * gh * gw
    assert int((b["input_ids"].value() == spec.config.video_token_id).sum()) == tokens


def test_omni_thinkers_get_seconds_per_grid():
    _, _, b = _batch("video-text-to-text", "qwen2_5_omni_thinker", "Qwen2_5OmniThinkerForConditionalGeneration")
    # processing_qwen2_5_omni.py: temporal_patch_size 2 / the hardcoded 2.0 fps = 1.0 s per grid
    assert b["video_second_per_grid"].value().tolist() == [1.0]


def test_aria_counts_its_projector_queries():
    spec, opts, b = _batch("image-text-to-text", "aria", "AriaForConditionalGeneration")
    # the tiny table: 32-px images of 8-px patches, 16 patches -> round(16 * 128 / 1225) = 2 queries
    assert spec.config.projector_patch_to_query_dict == {16: 2}
    assert int((b["input_ids"].value() == spec.config.image_token_index).sum()) == 2
    with pytest.raises(MemgraphError, match="pass --image-size 32"):  # the tower's size
        spec.batch(TrainingOptions(seq_len=64, image_size=64), torch.float32)


def test_granite_docling_tiles_with_their_mask():
    spec, _, b = _batch("image-text-to-text", "granite_docling", "GraniteDoclingForConditionalGeneration")
    v = spec.config.vision_config
    # image_seq_len = (32 // 8)^2 / scale_factor^2 tokens per tile, one tile
    per_tile = int((v.image_size // v.patch_size) ** 2 / v.scale_factor ** 2)
    assert int((b["input_ids"].value() == spec.config.image_token_id).sum()) == per_tile
    assert b["pixel_values"].shape == (1, 1, 3, 32, 32)
    assert b["pixel_attention_mask"].value().tolist() == [[True]]


def test_cohere_compass_gets_a_rope_per_layer_type():
    spec, _ = _spec("image-text-to-text", "cohere_compass", "CohereCompassForConditionalGeneration")
    text = spec.config.get_text_config()
    # [24, 20, 20] scaled to half the tiny head dim, 16 / 2 = 8: [24 * 8 // 64, 20 * 8 // 64, ...] = [3, 2, 2],
    # the last topped up to the sum: [3, 2, 3]
    assert text.rope_parameters == {t: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [3, 2, 3]}
                                    for t in set(text.layer_types)}


def test_idefics_attends_each_token_to_the_image_before_it():
    spec, opts = _spec("image-text-to-text", "idefics", "IdeficsForVisionText2Text")
    b = {s.name: s for s in spec.batch(TrainingOptions(seq_len=12, images=2), torch.float32).inputs}
    assert b["pixel_values"].shape == (1, 2, 3, 32, 32)  # [samples, images, C, H, W]
    mask = b["image_attention_mask"].value()[0]
    # BOS, [fake, <image>, fake] x 2 at positions 1-3 and 4-6, then text 7-11: image 0 from its <image> (2) to the
    # next image's leading fake token (4), image 1 from its <image> (5) to the end
    assert mask[:, 0].tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    assert mask[:, 1].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert (b["labels"].value()[0, 1:7] == IGNORE_INDEX).all() and (b["labels"].value()[0, 7:] != IGNORE_INDEX).all()


def test_pix2struct_patches_fill_its_budget():
    from memgraph.model_spec.flattened_patches import patch_grid

    # scale = sqrt(2048 * (16 / 56)^2) = 12.93: rows = cols = int(12.93 * 56 / 16) = int(45.25) = 45
    assert patch_grid(56, 56) == (45, 45)
    # scale = sqrt(2048 * 16 / 448 * 16 / 672) = 1.3197: rows int(36.95) = 36, cols int(55.43) = 55
    assert patch_grid(448, 672) == (36, 55)
    spec, opts, b = _batch("image-text-to-text", "pix2struct", "Pix2StructForConditionalGeneration")
    patches = b["flattened_patches"]
    assert patches.shape == (1, 2048, 2 + 768)  # padded to max_patches; ids + patch_embed_hidden_size values
    assert int(b["attention_mask"].value().sum()) == 45 * 45
    real = patches.make("cpu", torch.Generator().manual_seed(0))
    assert real[0, :45 * 45, 0].max() == 45 and real[0, :45 * 45, 1].min() == 1  # ids from 1
    assert not real[0, 45 * 45:].any()  # the padding is zeros
    assert b["labels"].shape == (1, 64)  # the decoder's target text


def test_kosmos25_puts_its_latents_after_the_image_start():
    spec, opts, b = _batch("image-text-to-text", "kosmos-2.5", "Kosmos2_5ForConditionalGeneration")
    assert spec.config.latent_query_num == 64 and opts.seq_len == 64 + 64  # the tiny latents, then the text
    # 56 px in a 4096-patch budget: scale = sqrt(4096) * 16 / 56 = 18.29, rows = cols = int(18.29 * 56 / 16) = 64
    assert b["flattened_patches"].shape == (1, 4096, 2 + 768) and b["flattened_patches"].rows == 64
    position = b["image_embeds_position_mask"].value()[0]
    assert position[:3].tolist() == [0, -1, 1] and position[64 + 1:64 + 4].tolist() == [1, -1, 0]
    assert int((position == 1).sum()) == 64
    assert int((b["labels"].value()[0] != IGNORE_INDEX).sum()) == 128 - 66  # BOS and the text


def test_florence2_images_take_its_processors_size():
    spec, opts, b = _batch("image-text-to-text", "florence2", "Florence2ForConditionalGeneration")
    ids = b["input_ids"].value()
    # the coverage tool's 64 px: DaViT's strides 4 * 2 * 2 * 2 = 32 -> 2 x 2 patches, + 1 pooled token = 5
    assert b["pixel_values"].shape == (1, 3, 64, 64) and int((ids == spec.config.image_token_id).sum()) == 5
    # no --image-size: the released processor's 768 px, (768 / 32)^2 + 1 = 577 tokens (its image_seq_length)
    full = {s.name: s for s in spec.batch(TrainingOptions(seq_len=640), torch.float32).inputs}
    assert full["pixel_values"].shape == (1, 3, 768, 768)
    assert int((full["input_ids"].value() == spec.config.image_token_id).sum()) == 577


def test_gemma4_frames_take_the_video_processors_budget():
    spec, opts, b = _batch("video-text-to-text", "gemma4", "Gemma4ForConditionalGeneration")
    # 70 soft tokens x 3^2 = 630 patches of 16 px: scale = sqrt(630 * 16^2 / 56^2) = 7.17, floor(56 * 7.17 / 48) * 48
    # = 384 px, 24 x 24 patches / 3^2 = 64 tokens per frame; 4 frames, each "<t> <boi> 64 x <video> <eoi>"
    assert opts.seq_len == 64 + 4 * (64 + 3)
    kind = b["mm_token_type_ids"].value()[0]
    assert _runs(kind == 2) == [64] * 4 and not (kind == 1).any()
    assert (b["input_ids"].value()[0][kind == 2] == spec.config.video_token_id).all()
    assert b["pixel_values_videos"].shape == (4, 630, 16 * 16 * 3) and "pixel_values" not in b
    assert b["num_frames_per_video"].value().tolist() == [4]
