"""Molmo 2's input recipe (model_spec/overlap_crops.py): its processor's crops, pooling indices and tokens, counted
by hand for the released crop (378 px, 14-px patches: 27 x 27, ``num_position_embeddings`` 729) and run for real
on the tiny config."""

import pytest
import torch

from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.overlap_crops import crop_patches, image_layout, image_text_tokens, tiling, video_frame_tokens
from memgraph.model_spec.sources import ModelSpec


def _config():
    from transformers import AutoConfig

    try:
        return AutoConfig.for_model("molmo2")
    except Exception:  # not in this transformers (the lower end of the supported range)
        pytest.skip("transformers has no molmo2")


def test_one_crop_image_by_hand():
    """378 x 378: less the margins (8 x 14 = 112 px) 266 px, one window of (27 - 8) x 14 = 266 px at scale 1.0
    (1 x 2 also has min scale 1.0: the tie goes to fewer crops); canvas 266 + 112 = 378 px = 27 patches, pooled
    2 x 2 into ceil(27/2) = 14 x 14; the 378-px view the same. Tokens 196 + 196 = 392; in the text
    (14 + 1) x 14 + 2 = 212 per view, 424."""
    cfg = _config()
    assert crop_patches(cfg) == 27 and cfg.vision_config.patch_size == 14
    crops, pooled, grid = image_layout(cfg, 378, 378)
    assert (crops, grid) == (2, [14, 14, 14, 14])
    assert pooled.shape == (392, 4)
    assert image_text_tokens(grid) == 424
    # 27 patches pad to 28 with the -1 after (pad 1: 0 before, 1 after): the last pooled row's lower half is -1
    assert pooled[0].tolist() == [0, 1, 27, 28]
    assert pooled[13].tolist() == [26, -1, 53, -1]
    assert pooled[195].tolist() == [728, -1, -1, -1]
    assert pooled[196].tolist() == [729, 730, 756, 757]  # the crop's patches follow the view's 729


def test_tiled_image_by_hand():
    """1024 x 768: 912 x 656 px less the margins; no tiling of at most 8 windows of 266 px covers it (rows >= 4 and
    cols >= 3 would need 12), so the one that shrinks it least: 3 x 2 and 4 x 2 both min(., 532/656 = 0.811), the
    first (6 crops) wins. Canvas (3 x 19 + 8) = 65 by (2 x 19 + 8) = 46 patches, pooled ceil(65/2) = 33 x 23 = 759;
    tokens 196 + 759 = 955, crops 1 + 6 = 7; text (14 + 1) x 14 + 2 + (23 + 1) x 33 + 2 = 212 + 794 = 1006."""
    cfg = _config()
    assert tiling(1024 - 112, 768 - 112, 266) == (3, 2)
    crops, pooled, grid = image_layout(cfg, 1024, 768)
    assert (crops, grid) == (7, [14, 14, 33, 23])
    assert pooled.shape == (955, 4)
    assert image_text_tokens(grid) == 1006
    high = pooled[196:]
    valid = high[high >= 0]
    # every canvas patch once: 65 x 46 = 2990 of the 6 crops' 6 x 729 = 4374 (the inner margins dropped)
    assert valid.numel() == valid.unique().numel() == 65 * 46
    assert int(valid.min()) == 729 and int(valid.max()) == 729 + 6 * 729 - 1
    # crop 0 keeps its columns 0..22 (its right margin of 4 dropped), crop 1 (row 0, col 1) its 4..26: pooled
    # token 11 takes canvas columns 22 and 23, the last of crop 0 and the first kept of crop 1 (its 5th)
    assert high[0].tolist() == [729, 730, 756, 757]
    assert high[11].tolist() == [729 + 22, 729 + 729 + 4, 729 + 27 + 22, 729 + 729 + 27 + 4]


def test_video_frames_by_hand():
    """Video: each frame one 378-px crop pooled 3 x 3: 9 x 9 = 81 tokens; 2 frames of a batch of 1:
    1 + 2 x (4 + 81 + 2) = 175 tokens (BOS, timestamp allowance, <frame_start>, patches, <frame_end>)."""
    cfg = _config()
    assert video_frame_tokens(cfg) == 81
    spec = ModelSpec(name="molmo2", source="config", task="image-text-to-text", config=cfg,
                     model_class="Molmo2ForConditionalGeneration")
    b = {s.name: s for s in spec.batch(TrainingOptions(target="cpu", seq_len=180, video_frames=2),
                                       torch.float32).inputs}
    assert b["pixel_values_videos"].shape == (2, 729, 14 * 14 * 3)
    assert b["video_grids"].value().tolist() == [[2, 9, 9]]
    pooling = b["video_token_pooling"].value()
    assert pooling.shape == (162, 9) and pooling[81].tolist()[:3] == [729, 730, 731]
    ids, mm = b["input_ids"].value(), b["mm_token_type_ids"].value()
    assert int((ids == cfg.image_token_id).sum()) == 162
    assert int(mm.sum()) == 2 * (81 + 2)
    assert ids[0, 5] == cfg.frame_start_token_id and ids[0, 87] == cfg.frame_end_token_id  # 1 + 4, 5 + 81 + 1


def test_image_batch_offsets_and_tokens():
    """2 samples x 1 image of 378 px: 4 crops, the second image's pooling indices offset by 2 x 729 = 1458."""
    cfg = _config()
    spec = ModelSpec(name="molmo2", source="config", task="image-text-to-text", config=cfg,
                     model_class="Molmo2ForConditionalGeneration")
    b = {s.name: s for s in spec.batch(TrainingOptions(target="cpu", seq_len=440, batch_size=2, image_size=378),
                                       torch.float32).inputs}
    assert b["pixel_values"].shape == (4, 729, 588)
    pooling = b["image_token_pooling"].value()
    assert pooling.shape == (784, 4) and pooling[392].tolist() == [1458, 1459, 1485, 1486]
    assert b["image_num_crops"].value().tolist() == [2, 2]
    ids = b["input_ids"].value()
    assert (ids == cfg.image_token_id).sum(1).tolist() == [392, 392]
    assert ids[0, 1] == cfg.low_res_image_start_token_id and ids[0, 1 + 212] == cfg.image_start_token_id
    assert ids[0, 212] == cfg.image_end_token_id and ids[0, 424] == cfg.image_end_token_id
