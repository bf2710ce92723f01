"""Patch-grid models whose processor cuts the image into cells, one text token each, without resizing it.

Inkling 2 (transformers 5.23): ``Inkling2ImageProcessor`` (image_processing_inkling2.py) pads each image with
-1 (on the 0-255 scale) up to whole cells of ``size`` = 40x40 px and cuts it into them: ``rows = ceil(H / 40)``,
``columns = ceil(W / 40)``, ``pixel_values`` ``[rows * columns, 40, 40, C]`` (channels last) and
``image_grid_thw`` ``[1, rows, columns]``, counted in cells; ``Inkling2Processor.replace_image_token`` puts
``image_grid_thw.prod()`` image tokens in the text, nothing around them. The vision embedding reads each cell as
``merge x merge`` patches (modeling_inkling2.py ``Inkling2VisionEmbeddings``: ``pixel_values.reshape(-1, merge,
patch, merge, patch, C)``), so the cell side is ``spatial_merge_size * patch_size``: the processor's 40 is the
released config's 2 x 20, and a config of other sizes takes cells of its own.
"""

from __future__ import annotations

import math

# model types whose image processor makes cells as above (transformers 5.23 image_processing_<type>.py)
CELL_GRID_MODELS = ("inkling2",)


def is_cell_grid(cfg) -> bool:
    return getattr(cfg, "model_type", None) in CELL_GRID_MODELS


def cell_side(cfg) -> int:
    """The cell side in pixels: ``spatial_merge_size * patch_size`` of the vision config."""
    v = cfg.vision_config
    return int(v.spatial_merge_size) * int(v.patch_size)


def cell_grid(cfg, height: int, width: int) -> tuple[int, int, int]:
    """(rows, columns, image tokens) of one ``height x width`` image: whole cells after the processor's padding."""
    side = cell_side(cfg)
    rows, columns = math.ceil(height / side), math.ceil(width / side)
    return rows, columns, rows * columns


def cell_shape(cfg) -> tuple[int, int, int]:
    """One cell's row of ``pixel_values``: ``[side, side, C]``, channels last."""
    side = cell_side(cfg)
    channels = getattr(cfg.vision_config, "num_channels", None) or 3
    return side, side, int(channels)


__all__ = ["CELL_GRID_MODELS", "cell_grid", "cell_shape", "cell_side", "is_cell_grid"]
