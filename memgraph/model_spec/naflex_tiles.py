"""LFM2-VL: a SigLIP2 NaFlex tower on patch rows padded to a fixed count, one image as one view.

Its image processor (image_processing_lfm2_vl.py, transformers 5.23; class defaults: ``encoder_patch_size`` 16,
``downsample_factor`` 2, ``min_image_tokens`` 64, ``max_image_tokens`` 256, ``tile_size`` 512,
``max_pixels_tolerance`` 2.0) resizes an image that is not too large (``_is_image_too_large``: its sides rounded to
multiples of 32 hold at most ``256 * 16^2 * 2^2 * 2.0`` pixels) by ``smart_resize``: sides multiples of
``patch * downsample`` = 32 px, pixels within ``64 * 16^2 * 2^2`` = 65,536 .. ``256 * 16^2 * 2^2`` = 262,144; a
larger image is cut into 512-px tiles plus a thumbnail, which memgraph does not lay out (refused). Each view is its
16-px patches as rows of ``16 * 16 * C`` values, padded to ``max_num_patches`` = max(256 * 2^2, (512 / 16)^2) =
1024 rows (``pixel_values`` ``[views, 1024, 768]``), with ``pixel_attention_mask`` ``[views, 1024]`` on the real
rows and ``spatial_shapes`` ``[views, 2]`` (patches high, wide). The projector unshuffles 2 x 2 patches into one
token: ``ceil(rows / 2) * ceil(cols / 2)`` image tokens (processing_lfm2_vl.py ``_get_image_num_tokens``), between
``<|image_start|>`` and ``<|image_end|>``. Tokens per sample::

    [BOS] ([image] * T  [text]) * N  [text ...]
"""

from __future__ import annotations

import math

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX

# image_processing_lfm2_vl.py Lfm2VlImageProcessor class defaults (transformers 5.23)
MIN_IMAGE_TOKENS, MAX_IMAGE_TOKENS, TILE_SIZE, MAX_PIXELS_TOLERANCE = 64, 256, 512, 2.0


def is_naflex_tiles(cfg) -> bool:
    """LFM2-VL: a SigLIP2 (NaFlex) vision config and a ``downsample_factor``."""
    return getattr(cfg, "model_type", None) == "lfm2_vl"


def single_view(cfg, height: int, width: int, smart_resize) -> tuple[int, int, int, int]:
    """(patches high, patches wide, image tokens, padded patch rows) of an image the processor does not tile;
    ``smart_resize``: multimodal_inputs.py's (handed in: that module imports this one)."""
    patch, down = int(cfg.vision_config.patch_size), int(cfg.downsample_factor)
    factor, per_token = patch * down, patch * patch * down * down
    rounded = max(patch, round(height / factor) * factor) * max(patch, round(width / factor) * factor)
    if rounded > MAX_IMAGE_TOKENS * per_token * MAX_PIXELS_TOLERANCE:
        raise MemgraphError(f"--image-size {height}x{width}: {cfg.model_type}'s processor cuts an image this large into "
                            f"{TILE_SIZE}-px tiles and a thumbnail, which memgraph does not lay out: pass --image-size "
                            f"{int(math.sqrt(MAX_IMAGE_TOKENS * per_token))} or less")
    h, w = smart_resize(height, width, factor=factor, min_pixels=MIN_IMAGE_TOKENS * per_token,
                        max_pixels=MAX_IMAGE_TOKENS * per_token)
    rows, cols = h // patch, w // patch
    padded = max(MAX_IMAGE_TOKENS * down * down, (TILE_SIZE // patch) ** 2)  # the processor's max_num_patches
    return rows, cols, math.ceil(rows / down) * math.ceil(cols / down), padded


def naflex_inputs(cfg, opts, defaults, dtype, kit) -> list:
    """``input_ids`` with ``T`` image tokens per image, ``pixel_values`` ``[B*N, padded, p*p*C]``,
    ``pixel_attention_mask``, ``spatial_shapes``, ``attention_mask``, ``labels`` (image tokens ignored)."""
    size = opts.image_size or defaults.get("image_size")
    if size is None:
        raise MemgraphError(f"no default image size for this {cfg.model_type} model (its processor resizes any image "
                            "by pixel count): pass --image-size N or HxW")
    rows, cols, per_image, padded = single_view(cfg, *kit.image_hw(size), kit.smart_resize)
    b, n, seq = opts.batch_size, kit.images(opts, defaults), kit.seq(opts, defaults)
    ids, _, image = kit.image_runs(cfg, b, seq, n, per_image, cfg.image_token_id)
    patch = int(cfg.vision_config.patch_size)
    channels = getattr(cfg.vision_config, "num_channels", None) or 3
    mask = torch.zeros(b * n, padded, dtype=torch.int32)  # pad_along_first_dim's int32 mask, 0 on the padding
    mask[:, :rows * cols] = 1
    return [
        kit.known("input_ids", ids),
        kit.image_input("pixel_values", (b * n, padded, patch * patch * channels), dtype),
        kit.known("pixel_attention_mask", mask),
        kit.known("spatial_shapes", torch.tensor([[rows, cols]] * (b * n), dtype=torch.int64)),
        kit.known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
        kit.known("labels", ids.masked_fill(image, IGNORE_INDEX)),
    ]


__all__ = ["is_naflex_tiles", "single_view", "naflex_inputs"]
