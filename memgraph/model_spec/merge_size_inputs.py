"""Inputs of VideoLLaMA 3: a patch grid whose spatial merge is an input, not a config setting.

Layout ``"merge-sizes"`` (multimodal_inputs.py ``layout_of``): a class whose ``forward`` takes ``image_merge_sizes``
(transformers 5.23 modeling_video_llama_3.py ``VideoLlama3ForConditionalGeneration``). Its processors make, as
Qwen2-VL's do, rows of flattened patches (``C * p * p`` values each, ``temporal_patch_size`` 1) with a
``[t, h, w]`` grid per image or video, but the merge of ``merge x merge`` patches into one token differs by
modality and is passed with them (``image_merge_sizes`` / ``video_merge_sizes``):

- **images** (image_processing_video_llama_3.py, class defaults): ``merge_size`` 1, each image resized by
  ``smart_resize`` with factor ``patch * 1`` into ``size = {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 *
  1280}`` (``--min-pixels`` / ``--max-pixels``, pixel_budget.py, whose class defaults are these figures); grid
  ``[1, H/p, W/p]``, ``H/p * W/p`` image tokens (processing_video_llama_3.py ``replace_image_token``:
  ``grid.prod() // merge_size**2``);
- **video** (video_processing_video_llama_3.py, class defaults): ``merge_size`` 2, every frame resized with factor
  ``patch * 2`` into ``min_pixels = 128 * 28 * 28`` and ``max_pixels = 28 * 28 * 768 // frames`` (the budget is the
  whole video's: "diff from Qwen!" in its ``resize``); grid ``[frames, H/p, W/p]``, ``frames * H/p * W/p / 4`` video
  tokens. ``use_token_compression`` (default True) drops the tokens of patches that barely change from the previous
  frame; the recipe's frames all differ, so ``video_compression_mask`` keeps every token (the most memory).

Tokens per sample: the image tokens of each image, then per frame a timestamp (``"Time 0.0s:"``, ordinary text)
and its tokens, then text to ``--seq-len``; no loss on image or video tokens.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec
from memgraph.model_spec.pixel_budget import pixel_budget

LONG = torch.int64
IMAGE_MERGE = 1  # VideoLlama3ImageProcessor.merge_size (class attribute, transformers 5.23)
VIDEO_MERGE = 2  # VideoLlama3VideoProcessor.merge_size
VIDEO_MIN_PIXELS = 128 * 28 * 28  # VideoLlama3VideoProcessor.size["shortest_edge"]
VIDEO_MAX_PIXELS = 28 * 28 * 768  # VideoLlama3VideoProcessor.size["longest_edge"], shared by the video's frames
TIMESTAMP_TOKENS = 1  # text beside each frame in the recipe (its length moves text, never memory: seq is fixed)


def is_merge_sizes(cls) -> bool:
    return cls is not None and "image_merge_sizes" in inspect.signature(cls.forward).parameters


def image_grid(cfg, size, opts, defaults, smart_resize) -> tuple[int, int]:
    """(grid_h, grid_w) of one image of ``size`` (H, W) after the image processor's resize."""
    p = cfg.vision_config.patch_size
    budget = pixel_budget(opts, defaults)
    h, w = smart_resize(*size, factor=p * IMAGE_MERGE, min_pixels=budget.min_pixels, max_pixels=budget.max_pixels)
    return h // p, w // p


def video_grid(cfg, size, frames: int, smart_resize) -> tuple[int, int]:
    """(grid_h, grid_w) of each frame of a ``frames``-frame video of ``size`` (H, W)."""
    p = cfg.vision_config.patch_size
    h, w = smart_resize(*size, factor=p * VIDEO_MERGE, min_pixels=VIDEO_MIN_PIXELS,
                        max_pixels=VIDEO_MAX_PIXELS // frames)
    return h // p, w // p


def merge_size_inputs(cfg, opts, defaults, dtype, kit, smart_resize) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch (``kit``: multimodal_inputs.py's shared pieces)."""
    size = kit.image_hw(opts.image_size or defaults.get("image_size") or 448)
    frames = getattr(opts, "video_frames", None) or 0
    n = opts.images if opts.images else (0 if frames else kit.images(opts, defaults))
    b, seq = opts.batch_size, kit.seq(opts, defaults)
    gh, gw = image_grid(cfg, size, opts, defaults, smart_resize)
    per_image = gh * gw // IMAGE_MERGE ** 2
    vh, vw = video_grid(cfg, size, frames, smart_resize) if frames else (0, 0)
    per_frame = vh * vw // VIDEO_MERGE ** 2
    need = 1 + n * per_image + frames * (TIMESTAMP_TOKENS + per_frame)
    if seq < need:
        raise kit.too_short(seq, need, f"{n} image(s) of {per_image} tokens"
                            + (f" and {frames} frames of {per_frame}" if frames else ""))
    ids, _ = kit.sample_text_ids(cfg, b, seq)
    image_pos = torch.zeros(seq, dtype=torch.bool)
    video_pos = torch.zeros(seq, dtype=torch.bool)
    image_pos[1:1 + n * per_image] = True
    pos = 1 + n * per_image
    for _ in range(frames):
        video_pos[pos + TIMESTAMP_TOKENS:pos + TIMESTAMP_TOKENS + per_frame] = True
        pos += TIMESTAMP_TOKENS + per_frame
    ids[:, image_pos] = cfg.image_token_id
    ids[:, video_pos] = cfg.video_token_id
    labels = ids.masked_fill((image_pos | video_pos).expand(b, seq), IGNORE_INDEX)
    v = cfg.vision_config
    row = (getattr(v, "num_channels", 3) * v.patch_size ** 2,)
    inputs = [kit.known("input_ids", ids), kit.known("attention_mask", torch.ones(b, seq, dtype=LONG))]
    if n:
        inputs += [InputSpec("pixel_values", (b * n * gh * gw, *row), dtype),
                   kit.known("image_grid_thw", torch.tensor([[1, gh, gw]] * (b * n), dtype=LONG)),
                   kit.known("image_merge_sizes", torch.full((b * n,), IMAGE_MERGE, dtype=LONG))]
    if frames:
        inputs += [InputSpec("pixel_values_videos", (b * frames * vh * vw, *row), dtype),
                   kit.known("video_grid_thw", torch.tensor([[frames, vh, vw]] * b, dtype=LONG)),
                   kit.known("video_merge_sizes", torch.full((b,), VIDEO_MERGE, dtype=LONG)),
                   kit.known("video_compression_mask", torch.ones(b * frames * per_frame, dtype=torch.bool))]
    note = (f"{n} image(s) of {gh * p_of(cfg)}x{gw * p_of(cfg)} px, {per_image} tokens each (merge 1)"
            + (f"; a video of {frames} frames of {vh * p_of(cfg)}x{vw * p_of(cfg)} px, {per_frame} tokens each "
               "(merge 2, no token compressed)" if frames else ""))
    return inputs + [kit.known("labels", labels)], note


def p_of(cfg) -> int:
    return cfg.vision_config.patch_size


__all__ = ["IMAGE_MERGE", "TIMESTAMP_TOKENS", "VIDEO_MERGE", "image_grid", "is_merge_sizes", "merge_size_inputs", "video_grid"]
