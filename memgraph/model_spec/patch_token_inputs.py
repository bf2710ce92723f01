"""Inputs of image-text models with one image token per raw patch: Inkling (transformers 5.23).

Layout ``"patch-tokens"`` (multimodal_inputs.py ``layout_of``): a vision config with ``patch_size`` and
``temporal_patch_size`` but no spatial merge, and a ``get_image_features`` that takes ``pixel_values`` alone
(modeling_inkling.py ``InklingModel.get_image_features``: its vision tower folds each patch into one embedding).
Its image processor (image_processing_inkling.py ``InklingImageProcessor``, class defaults) keeps the image's size
(``rescale_image_frac`` None: no resize) and cuts it into ``size`` 40 x 40 px patches (the config's
``patch_size``) by its own ``divide_to_patches``: ``ceil(H / p)`` rows and ``W // p + 1`` columns (one more column
than ``ceil`` whenever ``W`` is a multiple of ``p``), each patch padded to ``p x p`` with -1, repeated over the
temporal patch of 2: ``pixel_values`` ``[patches, t, p, p, C]``. The processor puts one image token per patch in the
text (processing_inkling.py ``replace_image_token``: ``image_token * num_patches``).

Tokens per sample: BOS, each image's tokens, then text to ``--seq-len``; no loss on the image tokens.
"""

from __future__ import annotations

import inspect
import math

import torch

from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec

LONG = torch.int64


def is_patch_tokens(cfg, cls) -> bool:
    vision = getattr(cfg, "vision_config", None)
    if vision is None or cls is None or not hasattr(cls, "get_image_features"):
        return False
    if any(hasattr(vision, n) for n in ("spatial_merge_size", "merge_size", "merge_kernel_size", "image_size")):
        return False
    params = [p for p in inspect.signature(cls.get_image_features).parameters if p not in ("self", "kwargs")]
    return (params == ["pixel_values"] and isinstance(getattr(vision, "patch_size", None), int)
            and isinstance(getattr(vision, "temporal_patch_size", None), int))


def patches_of(cfg, height: int, width: int) -> tuple[int, int]:
    """(rows, columns) of patches the processor cuts a ``height x width`` image into (``divide_to_patches``)."""
    p = cfg.vision_config.patch_size
    return math.ceil(height / p), width // p + 1


def patch_token_inputs(cfg, opts, defaults, dtype, kit) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch (``kit``: multimodal_inputs.py's shared pieces)."""
    h, w = kit.image_hw(opts.image_size or defaults.get("image_size") or 448)
    n, b, seq = kit.images(opts, defaults), opts.batch_size, kit.seq(opts, defaults)
    rows, cols = patches_of(cfg, h, w)
    per_image = rows * cols
    if seq < 1 + n * per_image + 1:
        raise kit.too_short(seq, 1 + n * per_image, f"{n} image(s) of {per_image} tokens")
    ids, _ = kit.sample_text_ids(cfg, b, seq)
    ids[:, 1:1 + n * per_image] = cfg.image_token_id
    labels = ids.clone()
    labels[:, 1:1 + n * per_image] = IGNORE_INDEX
    v = cfg.vision_config
    shape = (b * n * per_image, v.temporal_patch_size, v.patch_size, v.patch_size, getattr(v, "num_channels", 3))
    inputs = [kit.known("input_ids", ids), kit.known("attention_mask", torch.ones(b, seq, dtype=LONG)),
              InputSpec("pixel_values", shape, dtype), kit.known("labels", labels)]
    note = (f"{n} image(s) of {h}x{w} px cut into {rows}x{cols} patches of {v.patch_size} px, one token each "
            f"({per_image} tokens per image)")
    return inputs, note


__all__ = ["is_patch_tokens", "patch_token_inputs", "patches_of"]
