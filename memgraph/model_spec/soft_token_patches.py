"""Gemma 4's images: patches in a fixed budget, pooled to soft tokens (transformers 5.23 models/gemma4).

``Gemma4ImageProcessor`` (image_processing_gemma4.py) resizes each image, aspect kept, to the largest size whose
sides are multiples of ``pooling_kernel_size * patch_size`` (3 x 16 = 48 px) and whose patches fit in
``max_patches = max_soft_tokens * pooling_kernel_size**2`` (280 x 9 = 2520; ``get_aspect_ratio_preserving_size``:
the budget's scale ``sqrt(max_patches * p^2 / (H * W))`` applied to both sides, each rounded down to the multiple,
a side that rounds to 0 set to one multiple and the other to ``floor(long / short)`` multiples, at most
``max_patches / k^2`` of them). It cuts the image into ``p x p`` patches of ``p * p * C`` values, pads them with
zeros to ``max_patches`` rows, and gives each real patch its ``(x, y)`` position (padding: ``(-1, -1)``):
``pixel_values`` ``[images, max_patches, p*p*C]``, ``image_position_ids`` ``[images, max_patches, 2]``. One image
is ``patches / k^2`` soft tokens; ``Gemma4Processor.replace_image_token`` writes ``<boi> <image> * T <eoi>`` and
``mm_token_type_ids`` marks the image tokens with 1 (processing_utils.py ``create_mm_token_type_ids``).

The patch and pooling sizes are the vision config's (the processor's defaults, 16 and 3, are the released
config's, and the model's patch embedding and pooling read the config's); ``max_soft_tokens`` is the processor's
default, 280.
"""

from __future__ import annotations

import inspect
import math

import torch

from memgraph.errors import MemgraphError

MAX_SOFT_TOKENS = 280  # Gemma4ImageProcessor.max_soft_tokens (image_processing_gemma4.py, transformers 5.23)
VIDEO_MAX_SOFT_TOKENS = 70  # Gemma4VideoProcessor.max_soft_tokens (video_processing_gemma4.py): each frame's budget


def is_soft_token_patches(cfg, cls) -> bool:
    """A vision config with ``pooling_kernel_size`` and an integer ``patch_size``, and a forward that takes
    ``image_position_ids`` (Gemma 4 and the models built on it)."""
    vision = getattr(cfg, "vision_config", None)
    return (vision is not None and cls is not None and isinstance(getattr(vision, "pooling_kernel_size", None), int)
            and isinstance(getattr(vision, "patch_size", None), int)
            and "image_position_ids" in inspect.signature(cls.forward).parameters)


def resized(cfg, height: int, width: int, max_soft_tokens: int = MAX_SOFT_TOKENS) -> tuple[int, int]:
    """The processor's size for a ``height x width`` image (the rule in the module doc)."""
    v = cfg.vision_config
    p, k = v.patch_size, v.pooling_kernel_size
    max_patches = max_soft_tokens * k * k
    unit = k * p
    scale = math.sqrt(max_patches * p * p / (height * width))
    th, tw = math.floor(height * scale / unit) * unit, math.floor(width * scale / unit) * unit
    if th == 0 and tw == 0:
        raise MemgraphError(f"image {height}x{width}: Gemma 4's processor cannot resize it to whole {unit}-px cells")
    longest = (max_patches // (k * k)) * unit
    if th == 0:
        th, tw = unit, min(math.floor(width / height) * unit, longest)
    elif tw == 0:
        th, tw = min(math.floor(height / width) * unit, longest), unit
    return th, tw


def soft_tokens(cfg, height: int, width: int, max_soft_tokens: int = MAX_SOFT_TOKENS) -> int:
    """Soft tokens of one image: its patches after the resize, over ``pooling_kernel_size**2``."""
    v = cfg.vision_config
    th, tw = resized(cfg, height, width, max_soft_tokens)
    return (th // v.patch_size) * (tw // v.patch_size) // v.pooling_kernel_size ** 2


def patch_inputs(cfg, n: int, height: int, width: int, dtype,
                 max_soft_tokens: int = MAX_SOFT_TOKENS) -> tuple[tuple, torch.Tensor]:
    """(``pixel_values`` shape, ``image_position_ids`` values) of ``n`` such images."""
    v = cfg.vision_config
    p, k = v.patch_size, v.pooling_kernel_size
    th, tw = resized(cfg, height, width, max_soft_tokens)
    ph, pw = th // p, tw // p
    max_patches = max_soft_tokens * k * k
    channels = getattr(v, "num_channels", None) or 3
    if merged_patches(v):
        # Gemma 4 Unified: k x k patches merged into one model patch of (p * k)^2 * C values, their position the
        # kernel's (x // k, y // k), padded to max_soft_tokens (image_processing_gemma4_unified.py patches_merge,
        # pad_along_first_dim: ``(batch, max_soft_tokens, model_patch_size**2 * 3)``)
        ph, pw, p, max_patches = ph // k, pw // k, p * k, max_soft_tokens
    ys, xs = torch.meshgrid(torch.arange(ph), torch.arange(pw), indexing="ij")
    real = torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=-1)  # (x, y), row by row, as the processor's "xy" grid
    positions = torch.full((max_patches, 2), -1, dtype=torch.int64)
    positions[: ph * pw] = real
    return (n, max_patches, p * p * channels), positions.unsqueeze(0).repeat(n, 1, 1)


def merged_patches(vision) -> bool:
    """The vision config names a merged ``model_patch_size`` (Gemma 4 Unified: ``patch_size * pooling_kernel_size``,
    configuration_gemma4_unified.py): its processor hands the model merged patches."""
    return isinstance(getattr(vision, "model_patch_size", None), int)


__all__ = ["MAX_SOFT_TOKENS", "VIDEO_MAX_SOFT_TOKENS", "merged_patches", "is_soft_token_patches", "patch_inputs", "resized", "soft_tokens"]
