"""Input recipes of the image-text-to-text families added for issue 26's list B, on the tiny configs of
tools/coverage.py (batches only, no step): each shape and token count worked by hand from the processor's rule."""

import pytest
import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX
from memgraph.model_spec.multimodal_inputs import layout_of
from memgraph.model_spec.options import TrainingOptions
from tools.coverage import _spec_and_options


def _spec(task, model_type, cls):
    from transformers import AutoConfig

    try:
        AutoConfig.for_model(model_type)
    except Exception:  # not in this transformers (the lower end of the supported range)
        pytest.skip(f"transformers has no {model_type}")
    return _spec_and_options(task, model_type, cls)


def _batch(task, model_type, cls, **change):
    spec, opts = _spec(task, model_type, cls)
    if change:
        opts = TrainingOptions(**{**opts.__dict__, **change})
    batch = spec.batch(opts, torch.float32)
    return spec, batch, {s.name: s for s in batch.inputs}


def test_vision_encoder_decoder_feeds_the_labels_shifted_to_the_decoder():
    spec, _, b = _batch("image-text-to-text", "vision-encoder-decoder", "VisionEncoderDecoderModel")
    assert layout_of(spec.config) == "prefix"
    assert "input_ids" not in b  # the encoder reads pixels only
    assert b["pixel_values"].shape == (1, 3, 32, 32)  # the tiny ViT's image_size
    labels, dec = b["labels"].value(), b["decoder_input_ids"].value()
    assert labels.shape == dec.shape == (1, 64)
    assert dec[0, 0] == spec.config.decoder_start_token_id  # 0 in the tiny config
    assert torch.equal(dec[:, 1:], labels[:, :-1])  # shift_tokens_right, as the model does it


def test_text_only_image_text_class_gets_the_causal_lm_batch():
    spec, batch, b = _batch("image-text-to-text", "mistral4", "Mistral4ForCausalLM")
    assert layout_of(spec.config) == "text-only"
    assert sorted(b) == ["attention_mask", "input_ids", "labels"]
    assert torch.equal(b["labels"].value(), b["input_ids"].value())
    assert "takes no image" in batch.notes[0]
    with pytest.raises(MemgraphError, match="--images 1"):
        _batch("image-text-to-text", "mistral4", "Mistral4ForCausalLM", images=1)


def test_udop_word_boxes_page_and_target():
    spec, _, b = _batch("image-text-to-text", "udop", "UdopForConditionalGeneration")
    assert layout_of(spec.config) == "document"
    box = b["bbox"].value()
    assert box.shape == (1, 64, 4)
    # 10 words a line, each 1000 / 10 = 100 wide and 20 high: word 13 is column 3 of line 1
    assert box[0, 13].tolist() == [300, 20, 400, 40]
    assert box.max() <= 1000 and box.min() >= 0
    assert b["pixel_values"].shape == (1, 3, 32, 32)  # the tiny config's image_size
    assert b["labels"].shape == (1, 64)  # --target-len unset: --seq-len
    with pytest.raises(MemgraphError, match="--image-size 32"):
        _batch("image-text-to-text", "udop", "UdopForConditionalGeneration", image_size=64)


def test_evolla_protein_fills_the_processor_cap():
    spec, batch, b = _batch("image-text-to-text", "evolla", "EvollaForProteinText2Text")
    assert layout_of(spec.config) == "protein"
    # min(EvollaProcessor protein_max_length 1024, the tiny SaProt encoder's max_position_embeddings 1026)
    protein = b["protein_input_ids"].value()
    assert protein.shape == b["protein_attention_mask"].shape == (1, 1024)
    assert protein.min() >= 5  # no <cls>/<pad>/<eos>/<unk>/<mask>
    assert b["input_ids"].shape == b["labels"].shape == (1, 64)
    assert "1024 SaProt tokens" in batch.notes[0]


def test_video_llama_3_image_and_video_merges():
    spec, _, b = _batch("image-text-to-text", "video_llama_3", "VideoLlama3ForConditionalGeneration")
    assert layout_of(spec.config) == "merge-sizes"
    # image: 56 px, factor patch 16 x merge 1: round(56 / 16) = 4 -> 64 x 64 = 4,096 px >= 56 * 56: a 4 x 4 grid,
    # 16 tokens (merge 1), rows of 3 * 16 * 16 = 768 values
    assert b["pixel_values"].shape == (16, 768)
    assert b["image_grid_thw"].value().tolist() == [[1, 4, 4]]
    assert b["image_merge_sizes"].value().tolist() == [1]
    ids = b["input_ids"].value()
    assert (ids == spec.config.image_token_id).sum() == 16
    spec, _, b = _batch("video-text-to-text", "video_llama_3", "VideoLlama3ForConditionalGeneration")
    # video: factor 16 x 2 = 32; 64 x 64 = 4,096 px < 128 * 28 * 28 = 100,352: beta = sqrt(100,352 / 3,136) = 5.657,
    # ceil(56 * 5.657 / 32) * 32 = 320 px (102,400 px <= 28 * 28 * 768 / 4 frames = 150,528): 20 x 20 patches a
    # frame, 400 / 2^2 = 100 tokens a frame, 4 frames -> 400 video tokens
    assert b["video_grid_thw"].value().tolist() == [[4, 20, 20]]
    assert b["pixel_values_videos"].shape == (4 * 20 * 20, 768)
    assert b["video_merge_sizes"].value().tolist() == [2]
    assert b["video_compression_mask"].value().sum() == 400
    ids, labels = b["input_ids"].value(), b["labels"].value()
    assert (ids == spec.config.video_token_id).sum() == 400
    assert (labels[ids == spec.config.video_token_id] == IGNORE_INDEX).all()


def test_inkling_one_token_per_processor_patch():
    spec, batch, b = _batch("image-text-to-text", "inkling_mm_model", "InklingForConditionalGeneration")
    assert layout_of(spec.config) == "patch-tokens"
    # 56 x 56 px in 40-px patches: ceil(56 / 40) = 2 rows, 56 // 40 + 1 = 2 columns -> 4 tokens,
    # [patches, temporal 2, 40, 40, 3]
    assert b["pixel_values"].shape == (4, 2, 40, 40, 3)
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 4
    # an 80-px-wide image: 80 // 40 + 1 = 3 columns (divide_to_patches adds one whenever W is a multiple of 40)
    _, _, b = _batch("image-text-to-text", "inkling_mm_model", "InklingForConditionalGeneration", image_size=(40, 80))
    assert b["pixel_values"].shape[0] == 1 * 3


def test_pi0_cameras_state_and_actions():
    spec, _, b = _batch("image-text-to-text", "pi0", "PI0ForConditionalGeneration")
    assert layout_of(spec.config) == "policy"
    vlm = spec.config.vlm_config
    # PaliGemma's image_seq_length: (32 / 8)^2 = 16 tokens for the tiny tower's one camera image
    ids = b["input_ids"].value()
    assert (ids[0, :16] == vlm.image_token_id).all() and (ids[0, 16:] != vlm.image_token_id).all()
    assert b["pixel_values"].shape == (1, 1, 3, 32, 32)
    assert b["pixel_attention_mask"].value().tolist() == [[True]]
    assert b["state"].shape == (1, 32) and b["actions"].shape == (1, 50, 32)  # max_state_dim, chunk x action dim


def test_dots3_note_is_a_patch_grid_with_conv2d_rows():
    spec, _, b = _batch("image-text-to-text", "dots3_note", "Dots3NoteForConditionalGeneration")
    assert layout_of(spec.config) == "grid"  # get_image_features found on Dots3NoteModel
    # 56 px, factor 14 x 2 = 28: 56 x 56 = 3,136 px = min_pixels: a 4 x 4 grid, 16 / 2^2 = 4 tokens, rows [3, 14, 14]
    assert b["pixel_values"].shape == (16, 3, 14, 14)
    assert b["image_grid_thw"].value().tolist() == [[1, 4, 4]]
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 4


def test_nemotron_h_omni_patch_budget_grid_and_video_tubelets():
    spec, _, b = _batch("image-text-to-text", "nemotron_h_omni", "NemotronH_Omni_Reasoning_V3")
    assert layout_of(spec.config) == "patch-budget"
    # 56 px in the tiny tower's 8-px patches: round(56 / 8 + 0.5) = round(7.5) = 8 -> 8 x 8 = 64 patches, under the
    # 13,312 budget; below min_num_patches 1024: x sqrt(1024 / 64) = 4 -> 32 x 32, already multiples of the merge 2;
    # 32 * 32 / 2^2 = 256 tokens, patches of 3 * 8 * 8 = 192 values
    assert b["image_grid_hw"].value().tolist() == [[32, 32]]
    assert b["pixel_values"].shape == (1024, 192)
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 256
    spec, _, b = _batch("video-text-to-text", "nemotron_h_omni", "NemotronH_Omni_Reasoning_V3")
    # frames at round(sqrt(1024)) = 32 x 32 patches (256 x 256 px), 4 frames -> 2 tubelets of 256 tokens, written
    # with the image token
    assert b["pixel_values_videos"].shape == (4, 3, 256, 256)
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 2 * 256


def test_deepseek_ocr2_global_view_tokens_from_the_model():
    spec, batch, b = _batch("image-text-to-text", "deepseek_ocr2", "DeepseekOcr2ForConditionalGeneration")
    assert layout_of(spec.config) == "global-view"
    # the tiny SAM tower: 32 px / 8-px patches = 4 x 4, halved twice by its neck -> 1 patch <= 144: the 144 queries of
    # the 768-px view, plus the view separator = 145 image tokens; the global view at the SAM's 32 px
    assert b["pixel_values"].shape == (1, 3, 32, 32)
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 144 + 1
    assert "global view only" in batch.notes[0]
    with pytest.raises(MemgraphError, match="--image-size 768 or less"):
        _batch("image-text-to-text", "deepseek_ocr2", "DeepseekOcr2ForConditionalGeneration", image_size=1024)


def test_unlimited_ocr_global_view_rows_end_in_a_newline():
    spec, _, b = _batch("image-text-to-text", "unlimited_ocr", "UnlimitedOcrForConditionalGeneration")
    assert layout_of(spec.config) == "global-view"
    # processing_unlimited_ocr.py: q * (q + 1) + 1 tokens for q queries a side (a newline after each row, the view
    # separator); the tiny tower: 32 px / 8-px patches / the neck's 4 = q = 1 -> 1 * 2 + 1 = 3
    assert b["pixel_values"].shape == (1, 3, 32, 32)
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 1 * (1 + 1) + 1
    with pytest.raises(MemgraphError, match="--image-size 640 or less"):
        _batch("image-text-to-text", "unlimited_ocr", "UnlimitedOcrForConditionalGeneration", image_size=800)
