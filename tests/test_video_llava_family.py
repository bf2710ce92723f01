"""--video-frames on LLaVA-style video models (model_spec/video_inputs.py): LLaVA-NeXT-Video, LLaVA-OneVision,
Video-LLaVA, one video per sample at the tower's size, its tokens from the model's own get_video_features."""

import pytest
import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX
from memgraph.model_spec.multimodal_inputs import NoImageTextLayout
from memgraph.model_spec.options import TrainingOptions
from tools.coverage import _spec_and_options

FAMILIES = [
    # the coverage tool's tiny configs: 32-px frames of 8-px patches, 4 x 4 = 16 patches per frame, 4 frames
    # LLaVA-NeXT-Video: CLS dropped ("default"), 2x2 average pool (spatial_pool_stride 2): 2 x 2 = 4 per frame
    ("llava_next_video", "LlavaNextVideoForConditionalGeneration", 4 * 4),
    # LLaVA-OneVision: the 4 x 4 patches halved by bilinear interpolation (ceil(4 / 2) = 2): 4 per frame, plus one
    # image_newline per video
    ("llava_onevision", "LlavaOnevisionForConditionalGeneration", 4 * 4 + 1),
    # Video-LLaVA: get_video_features keeps every row of the video tower, 16 patches + CLS per frame
    ("video_llava", "VideoLlavaForConditionalGeneration", 4 * (16 + 1)),
]


def _spec(model_type, cls):
    return _spec_and_options("video-text-to-text", model_type, cls)


@pytest.mark.parametrize("model_type, cls, tokens", FAMILIES)
def test_a_video_takes_the_tokens_its_model_returns(model_type, cls, tokens):
    spec, opts = _spec(model_type, cls)
    assert (opts.video_frames, opts.images, opts.seq_len) == (4, None, 64 + tokens)
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}
    assert "pixel_values" not in b
    assert b["pixel_values_videos"].shape == (1, 4, 3, 32, 32)  # [videos, frames, C, H, W]
    ids = b["input_ids"].value()
    video = ids == spec.config.video_token_index
    assert video.nonzero()[:, 1].tolist() == list(range(1, 1 + tokens))  # after BOS, before the text
    assert (b["labels"].value()[video] == IGNORE_INDEX).all()
    assert int((b["labels"].value() != IGNORE_INDEX).sum()) == 64  # the text keeps its loss


def test_bad_video_flags_are_refused():
    spec, _ = _spec("llava_next_video", "LlavaNextVideoForConditionalGeneration")
    with pytest.raises(MemgraphError, match="drop --images"):
        spec.batch(TrainingOptions(seq_len=200, video_frames=4, images=1), torch.float32)
    with pytest.raises(MemgraphError, match="pass --image-size 32"):
        spec.batch(TrainingOptions(seq_len=200, video_frames=4, image_size=64), torch.float32)
    with pytest.raises(MemgraphError, match="cannot hold"):
        spec.batch(TrainingOptions(seq_len=10, video_frames=4), torch.float32)
    llava, _ = _spec_and_options("image-text-to-text", "llava", "LlavaForConditionalGeneration")
    with pytest.raises(NoImageTextLayout, match="drop --video-frames"):  # LLaVA 1.5 takes no video
        llava.batch(TrainingOptions(seq_len=200, video_frames=4), torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("model_type, cls, tokens", FAMILIES)
def test_a_video_step_matches_the_real_cpu_step(model_type, cls, tokens):
    # measured 2026-11-27 (tools/coverage.py video rows): llava_next_video -0.128%, llava_onevision -0.117%,
    # video_llava -0.157% (0-dim scalars and allocator rounding the meta trace does not see); the band is the
    # project's 1%
    from memgraph.api import analyze_spec
    from memgraph.measure import run_measurement

    spec, opts = _spec(model_type, cls)
    real = max(it["peak_allocated"] for it in run_measurement(spec, opts, "cpu")["iterations"][1:])
    spec, opts = _spec(model_type, cls)
    predicted = analyze_spec(spec, opts)[0].steady_state_peak.bytes
    assert abs(predicted - real) <= 0.01 * real
