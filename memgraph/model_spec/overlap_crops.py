"""Molmo 2: one low-resolution view and overlapping high-resolution crops per image, pooled by index lists.

The rule of transformers 5.23's Molmo2 processors (image_processing_molmo2.py, video_processing_molmo2.py,
processing_molmo2.py), with their class defaults: crop ``size`` 378 px, ``patch_size`` 14, ``max_crops`` 8,
``overlap_margins`` [4, 4] patches, image ``pooling_size`` [2, 2], video ``pooling_size`` [3, 3], no column tokens
in video frames. memgraph takes the crop side from the tower itself, ``sqrt(num_position_embeddings) * patch_size``
(the tower adds its fixed positional table to every crop, modeling_molmo2.py ``Molmo2VisionModel.forward``; 27 x 14
= 378 for the released towers, the processor's size).

Image (``compute_crop_geometry`` / ``select_tiling``): a crop of ``c`` patches keeps a window of ``w = c - 8``
patches; the image less the two margins (``H - 8p``, ``W - 8p``) is tiled by the ``(th, tw)``, ``th * tw <= 8``,
whose windows cover it at the smallest upscale (or, if none covers it, shrink it least; ties: fewer crops, then
fewer rows); the canvas is ``th * w * p + 8p`` by ``tw * w * p + 8p``. The crops' patches are indexed, each crop's
inner margins dropped, into a ``canvas / p`` patch grid, pooled in 2 x 2 windows (``arange_for_pooling``: the grid
padded with -1, half before, half after, to a multiple of 2) into ``ceil(rows / 2) x ceil(cols / 2)`` tokens; the
low-resolution view (the whole image resized to one crop) the same, ``ceil(c / 2)^2`` tokens. ``pixel_values``
``[crops, c*c, p*p*3]`` (the view first), ``image_token_pooling`` ``[tokens, 4]`` (indices into all patches of the
batch, -1 for padding), ``image_grids`` ``[images, 4]``, ``image_num_crops``. Tokens per image
(``replace_image_token``, ``<im_col>`` after every row of both views)::

    <low_res_im_start> ([patch] * rw <im_col>) * rh <im_end> <im_start> ([patch] * cols <im_col>) * rows <im_end>

Video: every frame resized to one crop, pooled 3 x 3 (``ceil(c / 3)^2`` tokens), ``<frame_start> [patch] * T
<frame_end>`` after its timestamp text (``"0.5 "``: memgraph reserves ``TIMESTAMP_TOKENS`` ordinary tokens).
``mm_token_type_ids`` is 1 on every image token and its start, column and end tokens (processing_utils.py
``create_mm_token_type_ids``: the processor's ``image_token_ids``); Molmo 2 requires it in training.
"""

from __future__ import annotations

import math

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX

# image_processing_molmo2.py / video_processing_molmo2.py class defaults (transformers 5.23)
MAX_CROPS, OVERLAP_MARGINS, IMAGE_POOLING, VIDEO_POOLING = 8, (4, 4), (2, 2), (3, 3)
TIMESTAMP_TOKENS = 4  # "0.5 " before each frame: memgraph's allowance (the tokenizer's count is not known here)


def is_overlap_crops(cfg) -> bool:
    """Molmo 2: a vision tower of a fixed patch grid and an adapter that pools by index lists."""
    return getattr(cfg, "model_type", None) == "molmo2"


def crop_patches(cfg) -> int:
    """Patches per crop side: the tower's positional table is ``c * c`` (``num_position_embeddings``)."""
    c = math.isqrt(int(cfg.vision_config.num_position_embeddings))
    if c * c != int(cfg.vision_config.num_position_embeddings) or c <= sum(OVERLAP_MARGINS):
        raise MemgraphError(f"{cfg.model_type}: vision_config.num_position_embeddings "
                            f"{cfg.vision_config.num_position_embeddings} is not a square of more than "
                            f"{sum(OVERLAP_MARGINS)} patches per side (its crops' overlap margins): fix the config")
    return c


def tiling(height: int, width: int, window: int) -> tuple[int, int]:
    """``select_tiling``: the (rows, cols) of at most ``MAX_CROPS`` windows of ``window`` px for an image of
    ``height`` x ``width`` (margins already taken off)."""
    cands = sorted(((r, c) for r in range(1, MAX_CROPS + 1) for c in range(1, MAX_CROPS + 1) if r * c <= MAX_CROPS),
                   key=lambda t: (t[0] * t[1], t[0]))
    # float32 as the processor computes it
    scales = [min(float(torch.tensor(r * window, dtype=torch.float32) / torch.tensor(float(height))),
                  float(torch.tensor(c * window, dtype=torch.float32) / torch.tensor(float(width)))) for r, c in cands]
    if all(s < 1 for s in scales):  # none covers the image: the one that shrinks it least (first of equals)
        return cands[max(range(len(cands)), key=lambda i: (scales[i], -i))]
    return cands[min(range(len(cands)), key=lambda i: (1e10 if scales[i] < 1 else scales[i], i))]


def _pool(grid: torch.Tensor, ph: int, pw: int) -> torch.Tensor:
    """``arange_for_pooling``: ``[rows/ph * cols/pw, ph*pw]`` windows of an index grid, padded with -1."""
    h, w = grid.shape
    pad_h, pad_w = -h % ph, -w % pw
    padded = torch.full((h + pad_h, w + pad_w), -1, dtype=grid.dtype)
    padded[pad_h // 2:pad_h // 2 + h, pad_w // 2:pad_w // 2 + w] = grid
    rows, cols = padded.shape[0] // ph, padded.shape[1] // pw
    return padded.view(rows, ph, cols, pw).permute(0, 2, 1, 3).reshape(rows * cols, ph * pw)


def image_layout(cfg, height: int, width: int) -> tuple[int, torch.Tensor, list[int]]:
    """(crops, pooling indices into this image's own patches, ``[rh, rw, rows, cols]``) of one image."""
    c, p = crop_patches(cfg), int(cfg.vision_config.patch_size)
    left, right = OVERLAP_MARGINS
    window = c - left - right
    th, tw = tiling(height - (left + right) * p, width - (left + right) * p, window * p)
    idx = torch.arange(th * tw * c * c).view(th, tw, c, c)
    keep = torch.ones(th, tw, c, c, dtype=torch.bool)  # each crop's margins inside the canvas dropped
    keep[1:, :, :left, :] = False
    keep[:, 1:, :, :left] = False
    keep[:-1, :, c - right:, :] = False
    keep[:, :-1, :, c - right:] = False
    grid = idx.permute(0, 2, 1, 3)[keep.permute(0, 2, 1, 3)].view(th * window + left + right,
                                                                   tw * window + left + right)
    high = _pool(grid, *IMAGE_POOLING)
    low = _pool(torch.arange(c * c).view(c, c), *IMAGE_POOLING)
    pooled = torch.cat([low, torch.where(high >= 0, high + c * c, high)])  # the low-resolution view is crop 0
    rh, rw = -(-c // IMAGE_POOLING[0]), -(-c // IMAGE_POOLING[1])
    rows, cols = -(-grid.shape[0] // IMAGE_POOLING[0]), -(-grid.shape[1] // IMAGE_POOLING[1])
    return 1 + th * tw, pooled, [rh, rw, rows, cols]


def image_text_tokens(grid: list[int]) -> int:
    """Tokens one image takes in the text: both views' patches, a column token per row, start and end each."""
    rh, rw, rows, cols = grid
    return (rw + 1) * rh + 2 + (cols + 1) * rows + 2


def video_frame_tokens(cfg) -> int:
    """Patch tokens of one frame: the crop pooled 3 x 3."""
    c = crop_patches(cfg)
    return -(-c // VIDEO_POOLING[0]) * -(-c // VIDEO_POOLING[1])


def overlap_crop_inputs(cfg, opts, defaults, dtype, kit) -> tuple[list, str]:
    """The batch of images (``--image-size``, ``--images``) or of one video each (``--video-frames``)."""
    frames = getattr(opts, "video_frames", None) or 0
    c, p = crop_patches(cfg), int(cfg.vision_config.patch_size)
    channels = getattr(cfg.vision_config, "num_channels", None) or 3
    b, seq = opts.batch_size, kit.seq(opts, defaults)
    ids, _ = kit.sample_text_ids(cfg, b, seq)
    mm = torch.zeros(b, seq, dtype=torch.int64)
    patch = torch.zeros(b, seq, dtype=torch.bool)
    if frames:
        per_frame = video_frame_tokens(cfg)
        need = 1 + frames * (TIMESTAMP_TOKENS + per_frame + 2)
        if seq < need:
            raise kit.too_short(seq, need, f"a video of {frames} frames of {per_frame} tokens")
        for f in range(frames):
            start = 1 + f * (TIMESTAMP_TOKENS + per_frame + 2) + TIMESTAMP_TOKENS
            ids[:, start], ids[:, start + per_frame + 1] = cfg.frame_start_token_id, cfg.frame_end_token_id
            patch[:, start + 1:start + 1 + per_frame] = True
            mm[:, start:start + per_frame + 2] = 1
        ids[patch] = cfg.image_token_id
        one = _pool(torch.arange(c * c).view(c, c), *VIDEO_POOLING)
        pooling = torch.cat([torch.where(one >= 0, one + k * c * c, one) for k in range(b * frames)])
        side = -(-c // VIDEO_POOLING[0])
        inputs = [kit.known("input_ids", ids),
                  kit.image_input("pixel_values_videos", (b * frames, c * c, p * p * channels), dtype),
                  kit.known("video_token_pooling", pooling),
                  kit.known("video_grids", torch.tensor([[frames, side, side]] * b, dtype=torch.int64))]
        note = (f"{cfg.model_type}: {frames} frames of {c * p}x{c * p} px, {per_frame} tokens each "
                f"({c}x{c} patches pooled 3x3), {TIMESTAMP_TOKENS} timestamp tokens assumed per frame")
    else:
        size = opts.image_size or defaults.get("image_size") or c * p
        h, w = kit.image_hw(size)
        crops, pooled, grid = image_layout(cfg, h, w)
        n = kit.images(opts, defaults)
        per_image = image_text_tokens(grid)
        need = 1 + n * per_image
        if seq < need:
            raise kit.too_short(seq, need, f"{n} image(s) of {per_image} tokens")
        rh, rw, rows, cols = grid
        for i in range(n):
            at = 1 + i * per_image
            for start_id, r, cc in ((cfg.low_res_image_start_token_id, rh, rw), (cfg.image_start_token_id, rows, cols)):
                ids[:, at] = start_id
                for row in range(r):  # the column token after each row: an ordinary token id (not in the config)
                    patch[:, at + 1 + row * (cc + 1):at + 1 + row * (cc + 1) + cc] = True
                ids[:, at + 1 + r * (cc + 1)] = cfg.image_end_token_id
                mm[:, at:at + r * (cc + 1) + 2] = 1
                at += r * (cc + 1) + 2
        ids[patch] = cfg.image_token_id
        patches = crops * c * c
        pooling = torch.cat([torch.where(pooled >= 0, pooled + k * patches, pooled) for k in range(b * n)])
        inputs = [kit.known("input_ids", ids),
                  kit.image_input("pixel_values", (b * n * crops, c * c, p * p * channels), dtype),
                  kit.known("image_token_pooling", pooling),
                  kit.known("image_grids", torch.tensor([grid] * (b * n), dtype=torch.int64)),
                  kit.known("image_num_crops", torch.tensor([crops] * (b * n), dtype=torch.int64))]
        note = (f"{cfg.model_type}: a {h}x{w} image becomes {crops - 1} overlapping crop(s) of {c * p} px and a "
                f"{c * p}-px view, {rh * rw + rows * cols} image tokens ({per_image} with its column, start and "
                "end tokens)")
    inputs += [kit.known("mm_token_type_ids", mm),
               kit.known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
               kit.known("labels", ids.masked_fill(mm.bool(), IGNORE_INDEX))]
    return inputs, note


__all__ = ["is_overlap_crops", "crop_patches", "tiling", "image_layout", "image_text_tokens", "video_frame_tokens",
           "overlap_crop_inputs", "TIMESTAMP_TOKENS"]
