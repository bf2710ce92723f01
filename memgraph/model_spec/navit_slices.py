"""MiniCPM-V 4.6 / 4.7 and MiniCPM-OCR: images as NaViT-packed patch rows with their sizes in patches.

Their image processor (image_processing_minicpmv4_6.py, also MiniCPM-V 4.7's; image_processing_minicpm_ocr.py,
transformers 5.23) resizes the whole image (the "source") so that each side is a multiple of ``patch * merge``
(``find_best_resize``: ``ensure_divide(side, patch_size * merge_factor)``, ``merge_factor`` 4 for the default
``downsample_mode`` "16x": the ViT's insert merger and the MLP merger each merge 2 x 2 patches; 2 for "4x", which
MiniCPM-OCR's config selects), cuts it into up to ``max_slice_nums`` 9 slices when it is larger than
``scale_resolution`` 448 squared, and writes every view as ``[C, patch, H * W / patch]`` patch rows
(``reshape_by_patch``), all views of the batch concatenated along the last axis: ``pixel_values`` ``[1, C, patch,
sum of H * W / patch]``, ``target_sizes`` ``[views, 2]`` (H / patch, W / patch). The processor writes
``H / patch * W / patch / divisor`` image tokens per view (processing_minicpmv4_6.py ``replace_image_token``:
``image_token_divisor`` 16 for "16x", 4 for "4x"), between ``<image>`` / ``</image>``.

Here one view per image: memgraph lays out images no larger than ``scale_resolution`` squared (the processor cuts
no slices for them), and refuses larger ones. The patch is the vision tower's ``patch_size`` (the processor's
``patch_size`` 14 is the released towers' patch). Tokens per sample::

    [BOS] ([image] * T  [text]) * N  [text ...]
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.image_tokens import model_class_for
from memgraph.model_spec.inputs import IGNORE_INDEX

SCALE_RESOLUTION = 448  # image_processing_minicpmv4_6.py / _minicpm_ocr.py class default: slices above 448 x 448
MERGES = {"16x": (4, 16), "4x": (2, 4)}  # downsample_mode -> (merge factor per side, patches per image token)


def is_navit_slices(cfg, model_class) -> bool:
    """A MiniCPM-V-style model: its forward takes ``target_sizes`` and its config names a ``downsample_mode``."""
    return model_class is not None and "target_sizes" in inspect.signature(model_class.forward).parameters \
        and getattr(cfg, "downsample_mode", None) in MERGES


def _ensure_divide(length: int, divisor: int) -> int:
    """image_processing_minicpmv4_6.py ``ensure_divide``: the nearest multiple of ``divisor``, at least one."""
    return max(round(length / divisor) * divisor, divisor)


def source_view(cfg, height: int, width: int) -> tuple[int, int, int]:
    """(patch rows, patch columns, image tokens) of an image no larger than the slicing threshold."""
    if height * width > SCALE_RESOLUTION * SCALE_RESOLUTION:
        raise MemgraphError(f"--image-size {height}x{width}: {cfg.model_type}'s processor cuts images larger than "
                            f"{SCALE_RESOLUTION}x{SCALE_RESOLUTION} into slices, which memgraph does not lay out: "
                            f"pass --image-size {SCALE_RESOLUTION} or less")
    patch = int(cfg.vision_config.patch_size)
    merge, divisor = MERGES[cfg.downsample_mode]
    h, w = _ensure_divide(height, patch * merge), _ensure_divide(width, patch * merge)
    return h // patch, w // patch, (h // patch) * (w // patch) // divisor


def navit_inputs(cfg, opts, defaults, dtype, kit) -> list:
    """``input_ids`` with ``T`` image tokens per image, ``pixel_values`` ``[1, C, patch, views * rows * cols *
    patch]``, ``target_sizes`` ``[views, 2]`` int32, ``attention_mask``, ``labels`` (image tokens ignored)."""
    h, w = kit.image_hw(opts.image_size or defaults.get("image_size") or SCALE_RESOLUTION)
    rows, cols, per_image = source_view(cfg, h, w)
    b, n, seq = opts.batch_size, kit.images(opts, defaults), kit.seq(opts, defaults)
    ids, _, image = kit.image_runs(cfg, b, seq, n, per_image, cfg.image_token_id)
    patch = int(cfg.vision_config.patch_size)
    channels = getattr(cfg.vision_config, "num_channels", None) or 3
    inputs = [
        kit.known("input_ids", ids),
        kit.image_input("pixel_values", (1, channels, patch, b * n * rows * cols * patch), dtype),
        kit.known("target_sizes", torch.tensor([[rows, cols]] * (b * n), dtype=torch.int32)),
        kit.known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
        kit.known("labels", ids.masked_fill(image, IGNORE_INDEX)),
    ]
    if "mm_token_type_ids" in inspect.signature(model_class_for(cfg).forward).parameters:
        # MiniCPM-V 4.7's M-RoPE reads them (modeling_minicpmv4_7.py ``get_rope_index``): 1 on the image tokens, as
        # the processor's ``create_mm_token_type_ids`` marks them
        inputs.insert(4, kit.known("mm_token_type_ids", image.to(torch.int64)))
    return inputs


__all__ = ["is_navit_slices", "source_view", "navit_inputs", "SCALE_RESOLUTION"]
