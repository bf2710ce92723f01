"""Fuyu's images: raw patches straight into the decoder, one text token each, rows ended by a newline token.

``FuyuImageProcessor`` (image_processing_fuyu.py, transformers 5.23) shrinks an image larger than ``size``
(1080 x 1920) to fit it, aspect kept (``int(side * min(1080 / H, 1920 / W))``), never enlarges one, and pads it
to 1080 x 1920; ``FuyuProcessor`` (processing_fuyu.py) then keeps ``ceil(h / p) * p`` x ``ceil(w / p) * p`` of
the padded image (``p`` the patch side) and cuts it into ``rows x cols`` patches of ``p * p * C`` values
(``pixel_values`` ``[patches of all images, p*p*C]``, concatenated); the text gets, per image, ``rows`` times
(``|SPEAKER|`` x ``cols``, ``|NEWLINE|``) and then ``<s>`` (``replace_image_token``). The model scatters one
patch embedding (``vision_embed_tokens``, a Linear of ``p*p*C`` inputs) at each ``image_token_id`` position
(modeling_fuyu.py ``get_placeholder_mask``); the newlines and ``<s>`` are text tokens. ``p`` is the config's
``patch_size`` (30 as the processor's), the patch embedding's.
"""

from __future__ import annotations

import math

FUYU_MAX_SIZE = (1080, 1920)  # FuyuImageProcessor.size (height, width)
PATCH_ROW_MODELS = ("fuyu",)


def is_patch_rows(cfg) -> bool:
    return getattr(cfg, "model_type", None) in PATCH_ROW_MODELS


def patch_grid(cfg, height: int, width: int) -> tuple[int, int]:
    """(rows, cols) of patches of one ``height x width`` image after the processor's resize and crop."""
    th, tw = FUYU_MAX_SIZE
    if height > th or width > tw:
        scale = min(th / height, tw / width)
        height, width = int(height * scale), int(width * scale)
    p = int(cfg.patch_size)
    return math.ceil(height / p), math.ceil(width / p)


def tokens_per_image(cfg, height: int, width: int) -> int:
    """Text positions one image takes: its patches, a newline per row, and the ``<s>`` after them."""
    rows, cols = patch_grid(cfg, height, width)
    return rows * (cols + 1) + 1


__all__ = ["FUYU_MAX_SIZE", "is_patch_rows", "patch_grid", "tokens_per_image"]
