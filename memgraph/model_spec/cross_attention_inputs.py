"""Inputs of cross-attention VLMs (Mllama, Llama 3.2 Vision): the image reaches the text through cross-attention
layers, not through image tokens scattered into the prompt.

What ``MllamaProcessor`` makes (transformers 5.23 ``models/mllama/processing_mllama.py`` and
``image_processing_mllama.py``), per sample of ``--images N`` images of ``--image-size`` (default: one tile):

* ``input_ids``: one ``<|image|>`` token (``image_token_index``) per image after BOS, then text;
* ``pixel_values`` ``[B, N, max_num_tiles, C, s, s]``: the image resized onto a canvas of tiles of the vision
  tower's ``image_size`` s and padded to ``max_num_tiles`` tiles, so its shape never depends on the image size;
* ``aspect_ratio_ids`` ``[B, N]``: 1 + the index of the chosen arrangement in the config's
  ``supported_aspect_ratios``; ``aspect_ratio_mask`` ``[B, N, max_num_tiles]``: 1 on the image's own tiles;
* ``cross_attention_mask`` ``[B, seq, N, max_num_tiles]``: ``get_cross_attention_token_mask`` /
  ``convert_sparse_cross_attention_mask_to_dense`` (called from transformers itself), each image seen by the
  text from its token on, on its own tiles;
* labels: the text, the image tokens ignored.

The arrangement is the processor's ``get_optimal_tiled_canvas``: each supported arrangement (a, b) is a canvas of
a*s rows by b*s columns (the processor reads the pair as height, width); the image's scale onto each is the
smaller of the two side ratios; the smallest scale >= 1 wins (least upscaling), else the largest below 1, ties
to the smallest canvas.
"""

from __future__ import annotations

import torch

from memgraph.errors import MemgraphError

LONG = torch.int64
IGNORE_INDEX = -100  # labels at this value are left out of the loss (PyTorch's cross-entropy default)


def is_cross_attention(cfg, model_class) -> bool:
    """A vision config with ``max_num_tiles`` and ``supported_aspect_ratios`` and a model that takes
    ``cross_attention_mask`` and ``aspect_ratio_ids`` (read from its forward's signature)."""
    import inspect

    vision = getattr(cfg, "vision_config", None)
    if model_class is None or not all(hasattr(vision, k) for k in ("max_num_tiles", "supported_aspect_ratios")):
        return False
    params = inspect.signature(model_class.forward).parameters
    return "cross_attention_mask" in params and "aspect_ratio_ids" in params


def tiled_canvas(cfg, height: int, width: int) -> tuple[int, tuple[int, int]]:
    """(aspect_ratio_id, (rows, columns) of tiles) the processor chooses for a ``height x width`` image."""
    v = cfg.vision_config
    s = int(v.image_size)
    options = []
    for index, (a, b) in enumerate(v.supported_aspect_ratios):
        scale = min(a * s / height, b * s / width)
        options.append((scale, a * b, index, (a, b)))
    up = [o for o in options if o[0] >= 1]
    best_scale = min(o[0] for o in up) if up else max(o[0] for o in options)
    scale, area, index, tiles = min((o for o in options if o[0] == best_scale), key=lambda o: o[1])
    return index + 1, tiles


def cross_attention_batch(cfg, b: int, n: int, seq: int, h: int, w: int, text_ids) -> tuple[dict, tuple, str]:
    """The integer inputs by name (input_ids, aspect_ratio_ids/mask, cross_attention_mask, attention_mask, labels
    with the image tokens at -100), the ``pixel_values`` shape, and one line on the tiles."""
    from transformers.models.mllama.processing_mllama import (convert_sparse_cross_attention_mask_to_dense,
                                                             get_cross_attention_token_mask)

    v = cfg.vision_config
    s, max_tiles, channels = int(v.image_size), int(v.max_num_tiles), int(getattr(v, "num_channels", 3))
    if seq < n + 2:
        raise MemgraphError(f"--seq-len {seq} cannot hold {n} image token(s) with text: pass --seq-len {n + 2} or more")
    ratio_id, (rows, cols) = tiled_canvas(cfg, h, w)
    tiles = rows * cols
    text = cfg.get_text_config()
    image_id = cfg.image_token_index
    ids = text_ids.clone()
    bos = getattr(text, "bos_token_id", None)
    ids[:, 0] = bos if isinstance(bos, int) else ids[:, 0]
    ids[:, 1:1 + n] = image_id
    spans = [get_cross_attention_token_mask(row.tolist(), image_id) for row in ids]
    dense = convert_sparse_cross_attention_mask_to_dense(spans, [[tiles] * n] * b, max_tiles, seq)
    ratio_mask = torch.zeros(b, n, max_tiles, dtype=LONG)
    ratio_mask[:, :, :tiles] = 1
    known = {
        "input_ids": ids,
        "aspect_ratio_ids": torch.full((b, n), ratio_id, dtype=LONG),
        "aspect_ratio_mask": ratio_mask,
        "cross_attention_mask": torch.as_tensor(dense, dtype=LONG),
        "attention_mask": torch.ones(b, seq, dtype=LONG),
        "labels": ids.masked_fill(ids == image_id, IGNORE_INDEX),
    }
    note = (f"image {h}x{w} is resized onto {rows}x{cols} tiles of {s} px (aspect_ratio_id {ratio_id}) and padded "
            f"to max_num_tiles {max_tiles}: pixel_values hold {max_tiles} tiles per image whatever the size")
    return known, (b, n, max_tiles, channels, s, s), note


__all__ = ["is_cross_attention", "tiled_canvas", "cross_attention_batch"]
