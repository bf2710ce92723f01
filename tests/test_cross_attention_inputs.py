"""Mllama (cross-attention VLM) inputs as MllamaProcessor makes them (model_spec/cross_attention_inputs.py)."""

import pytest
import torch
from transformers import AutoConfig

from tools.coverage import _spec_and_options
from memgraph.model_spec.cross_attention_inputs import tiled_canvas
from memgraph.model_spec.options import TrainingOptions


@pytest.mark.parametrize("h, w, ratio_id, tiles", [
    (448, 448, 1, (1, 1)),  # (1, 1) scales by exactly 1: the least upscaling
    # (a, b) scales by min(a * 448 / 896, b * 448 / 448): (2, 1), (2, 2), (3, 1), (4, 1) all by 1; the smallest
    # canvas (2, 1) wins, index 4 of [[1,1],[1,2],[1,3],[1,4],[2,1],[2,2],[3,1],[4,1]] -> id 5
    (896, 448, 5, (2, 1)),
    # every canvas downscales; (2, 2) keeps the most: min(896 / 2000, 896 / 2000) = 0.448 -> id 6
    (2000, 2000, 6, (2, 2)),
])
def test_the_processors_canvas(h, w, ratio_id, tiles):
    cfg = AutoConfig.for_model("mllama")  # class defaults: 448-px tiles, max_num_tiles 4
    assert cfg.vision_config.image_size == 448 and cfg.vision_config.max_num_tiles == 4
    assert tiled_canvas(cfg, h, w) == (ratio_id, tiles)


def test_the_batch_of_a_tiny_mllama():
    spec, opts = _spec_and_options("image-text-to-text", "mllama", "MllamaForConditionalGeneration")
    cfg = spec.config  # 32-px tiles, 4 at most
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}  # 64 tokens, one 32-px image
    assert b["pixel_values"].shape == (1, 1, 4, 3, 32, 32)  # padded to max_num_tiles whatever the image
    assert b["aspect_ratio_ids"].value().tolist() == [[1]] and b["aspect_ratio_mask"].value().tolist() == [[[1, 0, 0, 0]]]
    ids, mask = b["input_ids"].value(), b["cross_attention_mask"].value()
    assert (ids == cfg.image_token_index).nonzero().tolist() == [[0, 1]]  # after BOS
    assert mask.shape == (1, 64, 1, 4)
    # the text sees the image from its token on, on its one tile: 63 positions x 1 tile
    assert mask[0, 0].sum() == 0 and mask[0, 1:, 0, 0].eq(1).all() and mask[0, :, 0, 1:].sum() == 0
    assert b["labels"].value()[0, 1] == -100


def test_the_report_states_the_tiles():
    spec, opts = _spec_and_options("image-text-to-text", "mllama", "MllamaForConditionalGeneration")
    batch = spec.batch(TrainingOptions(seq_len=64, image_size=(64, 32), target="cpu"), torch.float32)
    assert batch.notes == ("image 64x32 is resized onto 2x1 tiles of 32 px (aspect_ratio_id 5) and padded to "
                           "max_num_tiles 4: pixel_values hold 4 tiles per image whatever the size",)
