"""Image-token rules of issue 26's list A, worked by hand against each processor: Chameleon's and Emu3's VQ codes
(model_spec/vq_tokens.py), Step3p7's global view, Granite 4 Vision's deepstack features (image_tokens.py), GLM-5
Next's video span and Qwen4-Exp's frame groups (video_inputs.py). Fast: configs only, no model runs."""

import pytest
import torch
import transformers
from transformers import AutoConfig

from memgraph.errors import MemgraphError
from memgraph.model_spec.image_tokens import feature_rows
from memgraph.model_spec.multimodal_inputs import smart_resize
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.video_inputs import frame_groups, frames_as_images, video_span
from memgraph.model_spec.vq_tokens import (
    code_name, is_vq_tokens, processed_size, synthetic_vocabulary_map, vq_tokens_per_image,
)


def _needs(class_name: str):
    return pytest.mark.skipif(getattr(transformers, class_name, None) is None,
                              reason=f"transformers {transformers.__version__} has no {class_name}")


def test_chameleon_codes_per_image_by_hand():
    cfg = AutoConfig.for_model("chameleon")
    with pytest.raises(MemgraphError, match="no vocabulary_map"):
        vq_tokens_per_image(cfg, 512, 512)
    cfg.vocabulary_map = synthetic_vocabulary_map(8192, 65536)
    assert is_vq_tokens(cfg)
    # channel_multiplier [1, 1, 2, 2, 4]: 4 halvings, 512 / 16 = 32 -> 32 * 32 = 1024 = processor image_seq_length
    assert vq_tokens_per_image(cfg, 512, 512) == 1024
    assert processed_size(cfg, TrainingOptions(), 512, 512, smart_resize) == (512, 512)  # the crop itself
    with pytest.raises(MemgraphError, match="multiples of 16"):
        vq_tokens_per_image(cfg, 520, 512)


def test_synthetic_vocabulary_maps_read_back_as_the_models_read_them():
    # Chameleon: code 123 -> "IMGIMG" + "BCD" + "Z" (digits as letters A-J), read back by bpe2img's remap
    assert code_name(123) == "IMGIMGBCDZ"
    m = synthetic_vocabulary_map(3, 16)
    assert m == {"IMGIMGAZ": 4, "IMGIMGBZ": 5, "IMGIMGCZ": 6, "<image>": 7}
    from transformers.models.chameleon.modeling_chameleon import ChameleonImageVocabularyMapping

    assert ChameleonImageVocabularyMapping(m).img2bpe == {0: 4, 1: 5, 2: 6}
    # Emu3: "<|visual token 000002|>", its code read from name[-8:-2]; then <image> and the end-of-line token
    e = synthetic_vocabulary_map(3, 16, "emu3")
    assert e["<|visual token 000002|>"] == 6 and e["<image>"] == 7 and e["<|extra_200|>"] == 8
    from transformers.models.emu3.modeling_emu3 import Emu3ImageVocabularyMapping

    mapping = Emu3ImageVocabularyMapping(e)
    assert mapping.img2bpe == {0: 4, 1: 5, 2: 6} and mapping.eol_token_id == 8
    with pytest.raises(ValueError):
        synthetic_vocabulary_map(13, 16)  # 4 + 13 + 1 ids > 16


def test_emu3_smart_resize_and_end_of_line_tokens_by_hand():
    cfg = AutoConfig.for_model("emu3")
    cfg.vocabulary_map = synthetic_vocabulary_map(8, 64, "emu3")
    opts = TrainingOptions()
    # 720 x 1280: multiples of 8 already, 921,600 px within [512^2 = 262,144, 1024^2 = 1,048,576]: kept
    assert processed_size(cfg, opts, 720, 1280, smart_resize) == (720, 1280)
    # rows 720 / 8 = 90, columns 1280 / 8 = 160, one end-of-line per row: 90 * 161 = 14,490 tokens
    assert vq_tokens_per_image(cfg, 720, 1280) == 90 * 161 == 14490
    # 256 x 256 = 65,536 px < 262,144: scaled by sqrt(262,144 / 65,536) = 2 -> ceil(512 / 8) * 8 = 512
    assert processed_size(cfg, opts, 256, 256, smart_resize) == (512, 512)
    assert vq_tokens_per_image(cfg, 512, 512) == 64 * 65
    # --min-pixels 64*64 keeps a 64-px image: 8 rows of 8 codes + 1 = 72 tokens (the sweep's tiny row)
    assert processed_size(cfg, TrainingOptions(min_pixels=64 * 64), 64, 64, smart_resize) == (64, 64)
    assert vq_tokens_per_image(cfg, 64, 64) == 8 * 9


@_needs("Step3p7ForConditionalGeneration")
def test_step3p7_global_view_tokens_by_hand():
    from memgraph.model_spec.image_tokens import _step3p7

    cfg = AutoConfig.for_model("step3p7")
    # 728 px / 14 px patches = 52, then two stride-2 convolutions: 26, 13 -> 169 = (728 // (14 * 4)) ** 2, the
    # processor's num_image_feature_size
    assert _step3p7(cfg, 728, 728).tokens == 169 == (728 // 56) ** 2
    # an odd grid rounds up in each convolution (padding 1): 32 px / 14 = 2 -> 1 -> 1
    assert _step3p7(cfg, 32, 32).tokens == 1


def test_deepstack_features_are_the_image_rows():
    hidden = 8
    rows = torch.empty(12, hidden, device="meta")  # one image's packed features, 12 image tokens
    out = type("Out", (), {"pooler_output": None, "deepstack_features": [(9, rows), (6, rows), (0, rows)]})()
    assert feature_rows(out, hidden, "x") == 12  # the first projector's rows, not 3 x 12


@_needs("Glm5NextForConditionalGeneration")
def test_glm5_next_video_frames_are_image_tokens_inside_a_span():
    cfg = AutoConfig.for_model("glm5_next")
    assert frames_as_images(cfg) and frame_groups(cfg)
    assert video_span(cfg) == (cfg.video_start_token_id, cfg.video_end_token_id)
    assert video_span(AutoConfig.for_model("glm4v")) is None  # GLM-4.1V finds video frames by image token only


@_needs("Qwen4ExpForConditionalGeneration")
def test_qwen4_exp_video_in_frame_groups():
    assert frame_groups(AutoConfig.for_model("qwen4_exp")) and not frames_as_images(AutoConfig.for_model("qwen4_exp"))


@_needs("MiniCPMV4_6ForConditionalGeneration")
def test_minicpm_v_source_view_by_hand():
    from memgraph.model_spec.navit_slices import is_navit_slices, source_view

    cfg = AutoConfig.for_model("minicpmv4_6")
    cfg.vision_config.patch_size = 14  # the processor's patch_size (image_processing_minicpmv4_6.py)
    assert is_navit_slices(cfg, transformers.MiniCPMV4_6ForConditionalGeneration)
    # "16x": sides to multiples of 14 * 4 = 56; 448 -> 32 x 32 patches -> 1024 / 16 = 64 tokens
    assert source_view(cfg, 448, 448) == (32, 32, 64)
    # 300 x 400: round(300 / 56) * 56 = 280 (20 patches), round(400 / 56) * 56 = 392 (28): 560 / 16 = 35 tokens
    assert source_view(cfg, 300, 400) == (20, 28, 35)
    cfg.downsample_mode = "4x"  # MiniCPM-OCR's: multiples of 14 * 2 = 28; 300 -> 308 (22), 400 -> 392 (28): 616 / 4
    assert source_view(cfg, 300, 400) == (22, 28, 154)
    with pytest.raises(MemgraphError, match="slices"):
        source_view(cfg, 449, 448)  # above 448 x 448 the processor slices


@_needs("Lfm2VlForConditionalGeneration")
def test_lfm2_vl_single_view_by_hand():
    from memgraph.model_spec.naflex_tiles import single_view

    cfg = AutoConfig.for_model("lfm2_vl")  # SigLIP2 patch 16, downsample_factor 2: sides multiples of 32
    # 256 x 256 = 65,536 px = the minimum 64 * 16^2 * 2^2: 16 x 16 patches, 8 x 8 = 64 tokens, padded to
    # max(256 * 2^2, (512 / 16)^2) = 1024 patch rows
    assert single_view(cfg, 256, 256, smart_resize) == (16, 16, 64, 1024)
    # 500 x 700: rounded 512 x 704 = 360,448 px > 262,144 (but under 2x that: no tiles); beta = sqrt(350,000 /
    # 262,144) = 1.1555: floor(500 / 1.1555 / 32) * 32 = 416, floor(700 / 1.1555 / 32) * 32 = 576 -> 26 x 36
    # patches, 13 * 18 = 234 tokens
    assert single_view(cfg, 500, 700, smart_resize) == (26, 36, 234, 1024)
    with pytest.raises(MemgraphError, match="tiles"):
        single_view(cfg, 1024, 1024, smart_resize)  # 1,048,576 px > 2 * 262,144: the processor tiles it


def test_glm5_next_tiny_video_layout_inside_its_span():
    """The sweep's tiny GLM-5 Next video row (tools/coverage.py): 4 frames, 2 temporal groups of image tokens, a
    timestamp after each, all between <|begin_of_video|> and <|end_of_video|>; the model's placeholder mask then
    counts every frame token as video (modeling_glm5_next.py ``in_video_span``)."""
    try:
        AutoConfig.for_model("glm5_next")
    except Exception:
        pytest.skip("transformers has no glm5_next")
    from memgraph.model_spec.multimodal_inputs import qwen2_vl_video_grid
    from tools.coverage import _spec_and_options

    spec, opts = _spec_and_options("video-text-to-text", "glm5_next", "Glm5NextForConditionalGeneration")
    cfg = spec.config
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}
    ids, kind = b["input_ids"].value()[0], b["mm_token_type_ids"].value()[0]
    gt, gh, gw, tokens = qwen2_vl_video_grid(cfg, 56, 4)
    assert gt == 2 and int((kind == 2).sum()) == tokens == gt * gh * gw // cfg.vision_config.spatial_merge_size ** 2
    start = int((ids == cfg.video_start_token_id).nonzero()[0])
    end = int((ids == cfg.video_end_token_id).nonzero()[0])
    inside = (ids == cfg.image_token_id) & (torch.arange(len(ids)) > start) & (torch.arange(len(ids)) < end)
    assert int(inside.sum()) == tokens and int((ids == cfg.image_token_id).sum()) == tokens  # no image outside
    # the span: start, then per group <|begin_of_image|> tokens <|end_of_image|> and a timestamp, then the end
    assert end - start == 1 + gt * (tokens // gt + 2 + 1)
