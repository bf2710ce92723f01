"""Idefics (1): images that the text reaches by gated cross-attention, chosen per token by ``image_attention_mask``.

IdeficsForVisionText2Text takes ``pixel_values`` ``[samples, images, C, H, W]`` (each image resized to the vision
tower's ``image_size``, image_processing_idefics.py) and ``image_attention_mask`` ``[samples, tokens, images]``:
1 where a token attends to an image, i.e. the image's ``<image>`` token and every token after it (processing_idefics.py
``image_attention_mask_for_packed_input_ids`` then ``incremental_to_binary_attention_mask``). The text holds
``<fake_token_around_image><image><fake_token_around_image>`` per image; the model reads no image-token id (the
tokens are ordinary vocabulary to it), so they are drawn as text here, and no loss is taken on them.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec

LONG = torch.int64
TOKENS_PER_IMAGE = 3  # <fake_token_around_image><image><fake_token_around_image> (processing_idefics.py)


def is_image_attention(cfg, cls) -> bool:
    """A model whose forward takes ``image_attention_mask`` (Idefics 1)."""
    return cls is not None and "image_attention_mask" in inspect.signature(cls.forward).parameters


def image_attention_inputs(cfg, opts, defaults: dict, dtype: torch.dtype, kit) -> list[InputSpec]:
    """``kit``: multimodal_inputs.py's shared pieces."""
    ImageInput, _images, _known, _seq = kit.image_input, kit.images, kit.known, kit.seq
    _too_short, image_hw, sample_text_ids = kit.too_short, kit.image_hw, kit.sample_text_ids
    vision = kit.vision_of(cfg)
    native = kit.native_size(vision)
    h, w = image_hw(opts.image_size or defaults.get("image_size") or native)
    if (h, w) != native:
        raise MemgraphError(f"this {cfg.model_type} model's vision tower takes {native[0]}x{native[1]} images (its "
                            f"processor resizes to that); got --image-size {h}x{w}: pass --image-size {native[0]}")
    b, n, seq = opts.batch_size, _images(opts, defaults), _seq(opts, defaults)
    need = 1 + n * TOKENS_PER_IMAGE + 1
    if seq < need:
        raise _too_short(seq, need, f"{n} image(s) of {TOKENS_PER_IMAGE} tokens")
    ids, _ = sample_text_ids(cfg, b, seq)
    bos = getattr(cfg.get_text_config(), "bos_token_id", None)
    ids[:, 0] = bos if isinstance(bos, int) else 1
    image_tokens = torch.zeros(b, seq, dtype=torch.bool)
    mask = torch.zeros(b, seq, n, dtype=LONG)
    for i in range(n):
        start = 1 + i * TOKENS_PER_IMAGE
        image_tokens[:, start:start + TOKENS_PER_IMAGE] = True
        # processing_idefics.py: a token attends to the last image before it (incremental mask, then one-hot)
        end = 1 + (i + 1) * TOKENS_PER_IMAGE if i + 1 < n else seq
        mask[:, start + 1:end, i] = 1
        if i + 1 < n:
            mask[:, end, i] = 1  # the next image's leading fake token still follows image i
    channels = getattr(vision, "num_channels", None) or 3
    return [
        _known("input_ids", ids),
        ImageInput("pixel_values", (b, n, channels, h, w), dtype),
        _known("image_attention_mask", mask),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", ids.masked_fill(image_tokens, IGNORE_INDEX)),
    ]


__all__ = ["TOKENS_PER_IMAGE", "image_attention_inputs", "is_image_attention"]
