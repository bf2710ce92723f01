"""Any-resolution tiling (LLaVA-NeXT, LLaVA-OneVision, LLaVA-NeXT-Video): an image becomes tiles of the vision
tower's size.

The processors (transformers 5.23 ``image_processing_llava_next.py`` and its OneVision / NeXT-Video copies) pick
the best resolution among the config's ``image_grid_pinpoints`` for the image's size (``select_best_resolution``:
the most effective pixels, then the least waste), cut the image resized to it into ``image_size``-px tiles and
add the whole image resized to one tile: ``pixel_values`` ``[images, tiles, C, s, s]`` and ``image_sizes``
``[images, 2]``. The model recomputes the tile count from ``image_sizes`` in ``get_image_features`` with
``image_size_to_num_patches``; memgraph calls that same function from the model's own module, so the count is
the model's (and its processor's) for any config, never a copy of the rule.
"""

from __future__ import annotations

import sys


def is_anyres(cfg) -> bool:
    """A config with ``image_grid_pinpoints`` (the resolutions its processor tiles images into)."""
    pinpoints = getattr(cfg, "image_grid_pinpoints", None)
    return isinstance(pinpoints, list) and len(pinpoints) > 0


def tiles_per_image(cfg, model_class, height: int, width: int) -> int:
    """Tiles of an ``height x width`` image, the base image included: the model module's own
    ``image_size_to_num_patches(image_size, grid_pinpoints, patch_size=vision image_size)``."""
    module = sys.modules[model_class.__module__]
    count = getattr(module, "image_size_to_num_patches")
    return int(count(image_size=(height, width), grid_pinpoints=cfg.image_grid_pinpoints,
                     patch_size=_tile(cfg)))


def best_resolution(cfg, model_class, height: int, width: int) -> tuple[int, int]:
    """The pinpoint the processor resizes an ``height x width`` image to (the model module's
    ``select_best_resolution``)."""
    module = sys.modules[model_class.__module__]
    h, w = module.select_best_resolution((height, width), cfg.image_grid_pinpoints)
    return int(h), int(w)


def _tile(cfg) -> int:
    size = cfg.vision_config.image_size
    return int(size[0] if isinstance(size, (list, tuple)) else size)


def describe(cfg, model_class, height: int, width: int) -> str:
    """One line: what an image of this size becomes."""
    tiles, tile = tiles_per_image(cfg, model_class, height, width), _tile(cfg)
    bh, bw = best_resolution(cfg, model_class, height, width)
    return (f"image {height}x{width} is resized to the grid pinpoint {bh}x{bw} and cut into {tiles - 1} tiles of "
            f"{tile} px, plus the whole image as one more tile: {tiles} tiles per image")


__all__ = ["is_anyres", "tiles_per_image", "best_resolution", "describe"]
