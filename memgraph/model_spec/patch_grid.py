"""Qwen2-VL-style patch-grid models whose vision config names its sizes otherwise.

Qwen2-VL's layout (multimodal_inputs.py ``_qwen2_vl``) is read from ``spatial_merge_size`` and
``temporal_patch_size`` in the vision config. Later models keep the layout (``pixel_values`` as rows of
patches, ``image_grid_thw`` ``[1, H/p, W/p]`` per image, ``grid_h * grid_w / merge^2`` image tokens in the
text, as each processor counts them: e.g. processing_kimi_k25.py ``image_grid_thw[i].prod() // merge_length``)
but name the sizes differently or take no temporal patch (transformers 5.23):

- Cosmos3-Edge, ERNIE 4.5-VL, Inkling 2, dots.3-note: ``spatial_merge_size`` without ``temporal_patch_size`` (their image
  processors' ``temporal_patch_size = 1``, image_processing_cosmos3_edge.py, image_processing_ernie4_5_vl_moe.py);
- Muse Glimmer / Muse Spark: ``merge_size`` and ``patch_temporal``;
- Kimi K2.5: ``merge_kernel_size`` ``[2, 2]``, and its patch embedding a ``Conv2d`` that reads each row as
  ``[C, p, p]`` (modeling_kimi_k25.py ``self.proj(pixel_values).view(pixel_values.size(0), -1)``).

A row's shape is read from the model's own patch embedding, built on ``meta``: a ``Linear`` reads
``in_features`` values, a ``Conv3d`` (Qwen2-VL) ``C * t * p * p`` flattened, a ``Conv2d`` ``[C, p, p]``.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json

import torch


def merge_of(vision) -> int | None:
    """The spatial merge (tokens are ``merge x merge`` patches) the vision config names, else None."""
    for name in ("spatial_merge_size", "merge_size", "merge_kernel_size"):
        v = getattr(vision, name, None)
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v) and len(set(v)) == 1:
            return int(v[0])
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def temporal_of(vision) -> int:
    """Frames per temporal patch (1 where the config names none: one frame per patch)."""
    for name in ("temporal_patch_size", "patch_temporal"):
        v = getattr(vision, name, None)
        if isinstance(v, (list, tuple)) and v:
            v = v[0]
        if isinstance(v, int) and v > 0:
            return v
    return 1


def is_patch_grid(cfg, cls) -> bool:
    """A patch-grid model: a vision config with an integer ``patch_size`` and a merge size, and a
    ``get_image_features`` that takes ``image_grid_thw``."""
    vision = getattr(cfg, "vision_config", None)
    features = _image_features(cfg, cls)
    if vision is None or features is None:
        return False
    patch = getattr(vision, "patch_size", None)
    patch = patch[0] if isinstance(patch, (list, tuple)) and patch else patch
    return (isinstance(patch, int) and merge_of(vision) is not None
            and "image_grid_thw" in inspect.signature(features).parameters)


def _image_features(cfg, cls):
    """``get_image_features`` of the head class, else of its base model (dots.3-note: only
    ``Dots3NoteModel`` defines it, modeling_dots3_note.py), else None."""
    if cls is None:
        return None
    if hasattr(cls, "get_image_features"):
        return cls.get_image_features
    from transformers.models.auto import modeling_auto

    from memgraph.model_spec.auto_classes import auto_class

    base = auto_class(cfg, modeling_auto.MODEL_MAPPING_NAMES)
    return getattr(base, "get_image_features", None)


# HunYuanProcessor.cat_extra_token (processing_hunyuan_vl.py, transformers 5.23: default True): two extra tokens
HUNYUAN_EXTRA_TOKENS = 2


def grid_tokens(cfg, grid_h: int, grid_w: int, merge: int) -> int:
    """Image tokens of a ``grid_h x grid_w`` patch grid: ``grid_h * grid_w / merge^2`` (Qwen2-VL), or HunYuan-VL's
    rule, one more token per merged row and the two extra tokens around the image
    (processing_hunyuan_vl.py ``replace_image_token``: ``patch_h * (patch_w + 1) + 2``, its image processor's
    ``spatial_patch_size`` 1)."""
    if getattr(cfg, "model_type", None) == "hunyuan_vl":
        return (grid_h // merge) * (grid_w // merge + 1) + HUNYUAN_EXTRA_TOKENS
    return grid_h * grid_w // (merge * merge)


def patch_row_shape(cfg, cls) -> tuple[int, ...]:
    """The shape of one patch's row of ``pixel_values``, from the model's patch embedding (see the module doc)."""
    try:
        key = cfg.to_json_string(use_diff=False)
    except Exception:
        return _row_shape(cfg, cls)
    return _cached(key, type(cfg), cls)


@functools.lru_cache(maxsize=32)
def _cached(key: str, config_class, cls) -> tuple[int, ...]:
    return _row_shape(config_class.from_dict(json.loads(key)), cls)


def _row_shape(cfg, cls) -> tuple[int, ...]:
    vision = cfg.vision_config
    channels = getattr(vision, "in_channels", None) or getattr(vision, "num_channels", None) or 3
    patch = vision.patch_size[0] if isinstance(vision.patch_size, (list, tuple)) else vision.patch_size
    default = (channels * temporal_of(vision) * patch * patch,)
    with torch.device("meta"):
        model = cls(copy.deepcopy(cfg))
    for name, module in model.named_modules():
        if "patch" not in name or not ("visual" in name or "vision" in name):
            continue
        if isinstance(module, torch.nn.Linear):
            return (module.in_features,)
        if isinstance(module, torch.nn.Conv3d):
            return (module.in_channels * int(torch.tensor(module.kernel_size).prod()),)
        if isinstance(module, torch.nn.Conv2d):
            return (module.in_channels, *module.kernel_size)
    return default


__all__ = ["grid_tokens", "is_patch_grid", "merge_of", "patch_row_shape", "temporal_of"]
