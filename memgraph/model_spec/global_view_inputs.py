"""Inputs of DeepSeek-OCR 2 (transformers 5.23 modeling_deepseek_ocr2.py) and Unlimited OCR (modeling_unlimited_ocr.py,
the same views, a newline token after each row of query features): a global view of the page, and local tiles for
large pages.

Layout ``"global-view"`` (multimodal_inputs.py ``layout_of``): a class whose ``forward`` takes ``pixel_values_local``
and ``num_local_patches`` and a vision config with a SAM tower (``sam_config``). Its image processor
(image_processing_deepseek_ocr2.py ``DeepseekOcr2ImageProcessor``, class defaults ``size`` 1024, ``tile_size`` 768,
``crop_to_patches`` True, 2..6 tiles) resizes every image's longer side to ``size`` and pads it square: the global
view, ``pixel_values`` ``[images, C, S, S]`` (S = the SAM tower's ``image_size``, 1024 in the released config, as
the processor's ``size``); an image whose longer side exceeds ``tile_size`` is also cut into 768-px tiles
(``pixel_values_local``). The image tokens per image are the feature rows the model's own ``get_image_features``
returns for the global view on meta (image_tokens.py): its learnable queries (256 for a 16 x 16 SAM grid, 144 for
12 x 12) plus the view separator, as the processor counts them (processing_deepseek_ocr2.py ``replace_image_token``:
``global_tokens + local_tokens * crops + 1``).

The recipe lays out the global view only, for images up to ``tile_size``; a larger ``--image-size`` is refused
(the local tiles are not laid out).
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.image_tokens import image_tokens_per_image
from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec

# the image processors' tile_size (class defaults, transformers 5.23): DeepseekOcr2ImageProcessor 768,
# UnlimitedOcrImageProcessor 640 (image_processing_unlimited_ocr.py; its global view 1024 too)
TILE_SIZES = {"deepseek_ocr2": 768, "unlimited_ocr": 640}
TILE_SIZE = TILE_SIZES["deepseek_ocr2"]


def is_global_view(cfg, cls) -> bool:
    if cls is None or getattr(getattr(cfg, "vision_config", None), "sam_config", None) is None:
        return False
    params = inspect.signature(cls.forward).parameters
    return "pixel_values_local" in params and "num_local_patches" in params


def global_view_inputs(cfg, opts, defaults, dtype, kit) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch (``kit``: multimodal_inputs.py's shared pieces)."""
    s = cfg.vision_config.sam_config.image_size
    tile = TILE_SIZES.get(cfg.model_type, TILE_SIZE)
    h, w = kit.image_hw(opts.image_size or defaults.get("image_size") or tile)
    if max(h, w) > tile:
        raise MemgraphError(f"--image-size {h}x{w}: {cfg.model_type}'s processor also cuts images larger than "
                            f"{tile} px into {tile}-px tiles, which memgraph does not lay out: pass "
                            f"--image-size {tile} or less")
    n, b, seq = kit.images(opts, defaults), opts.batch_size, kit.seq(opts, defaults)
    channels = getattr(cfg.vision_config.sam_config, "num_channels", 3)
    per_image = image_tokens_per_image(cfg, channels, s, s).tokens
    need = 1 + n * per_image + 1
    if seq < need:
        raise kit.too_short(seq, need - 1, f"{n} image(s) of {per_image} tokens")
    ids, _ = kit.sample_text_ids(cfg, b, seq)
    ids[:, 1:1 + n * per_image] = cfg.image_token_id
    labels = ids.clone()
    labels[:, 1:1 + n * per_image] = IGNORE_INDEX
    inputs = [kit.known("input_ids", ids), kit.image_input("pixel_values", (b * n, channels, s, s), dtype),
              kit.known("attention_mask", torch.ones(b, seq, dtype=torch.int64)), kit.known("labels", labels)]
    note = (f"{n} image(s) of {h}x{w} px as the global view only ({s}x{s} px, padded square; no local tiles at "
            f"{tile} px or less): {per_image} image tokens each")
    return inputs, note


__all__ = ["TILE_SIZE", "TILE_SIZES", "global_view_inputs", "is_global_view"]
