"""Issue 26's image-text families: base-model image features (DeepSeek-VL, Janus), patch-grid models that name
their sizes otherwise (patch_grid.py), Inkling 2's cells (cell_grid.py), Gemma 4's soft tokens
(soft_token_patches.py): input shapes by hand (fast), and the real CPU step against the prediction (slow)."""

import pytest
import torch

from memgraph.model_spec.multimodal_inputs import layout_of


def _batch(model_type):
    from transformers import AutoConfig

    try:
        AutoConfig.for_model(model_type)
    except Exception:  # not in this transformers (the lower end of the supported range)
        pytest.skip(f"transformers has no {model_type}")
    from tools.coverage import _spec_and_options, tiny_config

    cfg = tiny_config(model_type)
    spec, opts = _spec_and_options("image-text-to-text", model_type, "")
    return cfg, {i.name: i for i in spec.batch(opts, torch.float32).inputs}


def test_cosmos3_edge_grid_without_temporal_patch():
    cfg, b = _batch("cosmos3_edge")
    assert layout_of(cfg) == "grid"
    # 56 px, patch 16, spatial_merge_size 2: smart_resize to multiples of 32: round(56/32)*32 = 64 (64*64 = 4096
    # px >= min_pixels 3136); grid 64/16 = 4 x 4 = 16 patches; 16 / 2^2 = 4 image tokens
    assert b["image_grid_thw"].value().tolist() == [[1, 4, 4]]
    assert b["pixel_values"].shape == (16, 3 * 1 * 16 * 16)  # Linear patch embedding of 768 inputs, one frame
    assert int((b["input_ids"].value() == cfg.image_token_id).sum()) == 4


def test_kimi_k25_merge_kernel_and_conv_rows():
    cfg, b = _batch("kimi_k25")
    assert layout_of(cfg) == "grid"
    # patch 14, merge_kernel_size [2, 2]: 56 = 2 * 28, grid 4 x 4, 16 / 4 = 4 tokens; Conv2d rows [3, 14, 14]
    assert b["image_grid_thw"].value().tolist() == [[1, 4, 4]]
    assert b["pixel_values"].shape == (16, 3, 14, 14)
    assert int((b["input_ids"].value() == cfg.image_token_id).sum()) == 4
    assert "mm_token_type_ids" not in b  # Kimi K2.5's forward takes none


@pytest.mark.parametrize("model_type", ["deepseek_vl", "janus"])
def test_image_features_of_the_base_model(model_type):
    cfg, b = _batch(model_type)
    # fixed 32-px images of 8-px patches: (32 / 8)^2 = 16 image tokens (their get_image_features on model.model)
    assert (cfg.vision_config.image_size, cfg.vision_config.patch_size) == (32, 8)
    assert b["pixel_values"].shape == (1, 3, 32, 32)
    assert int((b["input_ids"].value() == cfg.image_token_id).sum()) == 16


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["deepseek_vl", "janus", "cosmos3_edge", "git", "blip", "kosmos-2", "mistral3",
                                        "muse_glimmer",
                                        "t5gemma2", "paddleocr_vl",
                                        # the tiny configs fixed in tools/coverage.py, and the new layouts
                                        "ernie4_5_vl_moe", "kimi_k25", "muse_spark", "pp_formulanet", "glm4v_moe",
                                        "llama4", "minimax_m3_vl", "mistral_large4", "inkling2", "gemma4", "fuyu", "hunyuan_vl",
                                        "deepseek_vl_hybrid"])
def test_real_cpu_step_within_one_percent(model_type):
    """Measured for real on the CPU allocator and analysed for the cpu target; 1%: the coverage sweep's tolerance
    (measured -0.123%, -0.001%, -0.007%, -0.078%, -0.100%, -0.002%, -0.117%, -0.001%, -0.071%,
    -0.123%; then -0.001%, -0.043%, -0.000%, -0.001%, -0.101%, -0.055%, -0.009%, -0.086%, -0.003%, -0.048%)."""
    from tools.coverage import architectures, run_one

    rows = [run_one(*a) for a in architectures(["image-text-to-text"], model_type)]
    if not rows or "has no class" in rows[0].reason:
        pytest.skip(f"transformers has no {model_type}")
    (row,) = rows
    assert row.runs_for_real and row.analyzes, row.reason
    assert abs(row.error_pct) <= 1.0, row


def test_inkling2_cells_of_the_padded_image():
    cfg, b = _batch("inkling2")
    # cell side = spatial_merge_size 2 x patch_size 20 = 40 px (Inkling2ImageProcessor.size 40x40); a 56-px image
    # padded to ceil(56 / 40) = 2 x 2 cells: 4 image tokens, pixel_values [4, 40, 40, 3] (channels last)
    assert (cfg.vision_config.spatial_merge_size, cfg.vision_config.patch_size) == (2, 20)
    assert b["image_grid_thw"].value().tolist() == [[1, 2, 2]]
    assert b["pixel_values"].shape == (4, 40, 40, 3)
    assert int((b["input_ids"].value() == cfg.image_token_id).sum()) == 4


def test_inkling2_refuses_video_and_pixel_budget():
    from memgraph.errors import MemgraphError
    from memgraph.model_spec.multimodal_inputs import image_text_to_text
    from memgraph.model_spec.options import TrainingOptions

    cfg, _ = _batch("inkling2")
    for extra, flag in (({"video_frames": 4}, "--video-frames"), ({"max_pixels": 10 ** 6}, "--max-pixels")):
        opts = TrainingOptions(batch_size=1, seq_len=64, image_size=56, **extra)
        with pytest.raises(MemgraphError, match=flag):
            image_text_to_text(cfg, opts, {}, torch.float32)


@pytest.mark.parametrize("model_type", ["gemma3n", "fast_vlm", "perception_lm"])
def test_timm_vision_towers_name_the_package(model_type):
    import importlib.util

    from memgraph.model_spec.vision_backend import missing_vision_backend

    if importlib.util.find_spec("timm") is not None:
        pytest.skip("timm is installed here")
    from tools.coverage import tiny_config

    try:
        cfg = tiny_config(model_type)
    except Exception:
        pytest.skip(f"transformers has no {model_type}")
    # AutoModel maps their vision configs to TimmWrapperModel, whose constructor requires_backends vision and timm
    assert "timm" in missing_vision_backend(cfg).split("requires ", 1)[1]


def test_gemma4_soft_tokens_of_its_patch_budget():
    from tools.coverage import _spec_and_options

    try:
        spec, opts = _spec_and_options("image-text-to-text", "gemma4", "")
    except Exception:
        pytest.skip("transformers has no gemma4")
    cfg = spec.config
    b = {i.name: i for i in spec.batch(opts, torch.float32).inputs}
    # patch 16, pooling 3, max_soft_tokens 280: max_patches 280 * 9 = 2520; a 56-px image scaled by
    # sqrt(2520 * 16^2 / 56^2) = 14.34 to 803 px, rounded down to a multiple of 48: 768; 48 x 48 = 2304 patches,
    # 2304 / 9 = 256 soft tokens; the sweep's 64 text tokens beside them
    assert (cfg.vision_config.patch_size, cfg.vision_config.pooling_kernel_size) == (16, 3)
    assert b["pixel_values"].shape == (1, 2520, 16 * 16 * 3) and b["input_ids"].shape == (1, 64 + 256)
    ids = b["input_ids"].value()
    assert int((ids == cfg.image_token_id).sum()) == 256
    assert ids[0, 1] == cfg.boi_token_id and ids[0, 258] == cfg.eoi_token_id
    pos = b["image_position_ids"].value()[0]
    assert pos[0].tolist() == [0, 0] and pos[1].tolist() == [1, 0] and pos[48].tolist() == [0, 1]
    assert (pos[2304:] == -1).all() and (pos[:2304] >= 0).all()
    assert torch.equal(b["mm_token_type_ids"].value()[0].bool(), ids[0] == cfg.image_token_id)


def test_fuyu_patch_rows():
    from types import SimpleNamespace

    from memgraph.model_spec.patch_row_inputs import patch_grid

    cfg, b = _batch("fuyu")
    # 32-px image (the tiny config's image_size), patch 8: 4 rows of 4 patches, each row ended by a newline, then
    # <s>: 4 * (4 + 1) + 1 = 21 positions, 16 image tokens; pixel_values [16, 8 * 8 * 3]
    assert cfg.patch_size == 8
    assert b["pixel_values"].shape == (16, 192)
    ids = b["input_ids"].value()[0]
    assert int((ids == cfg.image_token_id).sum()) == 16 and ids[20] == cfg.text_config.bos_token_id
    assert (b["labels"].value()[0, :21] == -100).all() and (b["labels"].value()[0, 21:] != -100).all()
    # the processor shrinks to fit 1080 x 1920: 2160 x 1920 by min(0.5, 1.0) to 1080 x 960, 36 x 32 patches of 30 px;
    # 100 x 95 px is kept and cropped to whole patches: ceil(100 / 30) = 4 x ceil(95 / 30) = 4
    fuyu = SimpleNamespace(patch_size=30)
    assert patch_grid(fuyu, 2160, 1920) == (36, 32) and patch_grid(fuyu, 100, 95) == (4, 4)


def test_hunyuan_vl_tokens_per_merged_row():
    cfg, b = _batch("hunyuan_vl")
    # 56 px, patch 16, merge 2: smart_resize to 64, a 4 x 4 grid; HunYuan's processor: (4 / 2) * (4 / 2 + 1) + 2 = 8
    # image tokens (Qwen2-VL's rule would give 16 / 4 = 4)
    assert b["image_grid_thw"].value().tolist() == [[1, 4, 4]] and b["pixel_values"].shape == (16, 768)
    assert int((b["input_ids"].value() == cfg.image_token_id).sum()) == 8


def test_deepseek_vl_hybrid_high_res_input():
    cfg, b = _batch("deepseek_vl_hybrid")
    # each image twice: the 32-px low-res tower's input and the SAM tower's (its image_size, 32 in the tiny config;
    # 1024 released); (32 / 8)^2 = 16 image tokens from the low-res grid
    assert cfg.high_res_vision_config.image_size == 32
    assert b["pixel_values"].shape == (1, 3, 32, 32) and b["high_res_pixel_values"].shape == (1, 3, 32, 32)
    assert int((b["input_ids"].value() == cfg.image_token_id).sum()) == 16


def test_vision_prefix_layouts():
    # GIT: no image token, one 32-px image beside 64 text tokens; labels are the text (the model prepends the image)
    cfg, b = _batch("git")
    assert layout_of(cfg) == "prefix"
    assert b["pixel_values"].shape == (1, 3, 32, 32) and b["input_ids"].shape == (1, 64)
    assert torch.equal(b["labels"].value(), b["input_ids"].value())
    # Kosmos-2: BOS, <image>, latent_query_num = 64 placeholders (not shrunk), </image>: seq 64 + 64 in the sweep
    cfg, b = _batch("kosmos-2")
    mask = b["image_embeds_position_mask"].value()
    assert mask.shape == (1, 128) and mask[0, 2:66].tolist() == [1] * 64 and int(mask.sum()) == 64
    assert (b["labels"].value()[mask.bool()] == -100).all()


def test_mistral3_tokens_from_its_split_rule():
    cfg, b = _batch("mistral3")
    # 32-px image, Pixtral patch 8, spatial_merge_size 2: (32 // 16) * (32 // 16) = 4 image tokens
    assert (cfg.vision_config.patch_size, cfg.spatial_merge_size) == (8, 2)
    assert int((b["input_ids"].value() == cfg.image_token_index).sum()) == 4
    assert b["image_sizes"].value().tolist() == [[32, 32]]
