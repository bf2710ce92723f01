"""Q-Former VLMs (BLIP-2, InstructBLIP): num_query_tokens image tokens per image, read from the model's structure
(image_tokens.py ``_query_tokens``); InstructBLIP's instruction again in the Q-Former's vocabulary."""

import pytest
import torch

from tools.coverage import _spec_and_options
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions


@pytest.mark.parametrize("model_type, cls", [("blip-2", "Blip2ForConditionalGeneration"),
                                             ("instructblip", "InstructBlipForConditionalGeneration")])
def test_query_tokens_fill_the_image_positions(model_type, cls):
    spec, opts = _spec_and_options("image-text-to-text", model_type, cls)  # 64 tokens, one 32-px image
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}
    ids = b["input_ids"].value()
    assert spec.config.num_query_tokens == 32  # the config classes' default
    assert int((ids == spec.config.image_token_index).sum()) == 32
    assert b["pixel_values"].shape == (1, 3, 32, 32)
    if model_type == "instructblip":
        # the sample's text tokens, 64 - 32 = 32, tokenized again for the Q-Former (below its 512 positions)
        assert b["qformer_input_ids"].shape == b["qformer_attention_mask"].shape == (1, 32)
        assert int(b["qformer_input_ids"].value().max()) < spec.config.qformer_config.vocab_size
    else:
        assert "qformer_input_ids" not in b


def test_instructblip_video_takes_four_frames_of_query_tokens():
    spec, opts = _spec_and_options("image-text-to-text", "instructblipvideo", "InstructBlipVideoForConditionalGeneration")
    assert opts.seq_len == 64 + 4 * 32  # coverage's text plus the 4 x 32 video tokens
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}
    assert b["pixel_values"].shape == (1, 4, 3, 32, 32)  # [samples, frames, C, H, W]
    ids = b["input_ids"].value()
    assert (ids == spec.config.video_token_index).nonzero()[:, 1].tolist() == list(range(128))  # first, as the processor
    assert b["qformer_input_ids"].shape == (1, 64)  # the 64 text tokens again for the Q-Former
    with pytest.raises(MemgraphError, match="pass --video-frames 4"):
        spec.batch(TrainingOptions(seq_len=200, video_frames=8), torch.float32)
