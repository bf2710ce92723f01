"""Inputs of document models that place each text token on the page image: UDOP.

Layout ``"document"`` (multimodal_inputs.py ``layout_of``): a class whose ``forward`` takes ``bbox`` and
``pixel_values`` and whose config names the page's ``image_size`` and ``patch_size`` (UDOP, transformers 5.23
modeling_udop.py ``UdopForConditionalGeneration``). Its processor (processing_udop.py ``UdopProcessor``):

- the page image resized to ``image_size`` (LayoutLMv3ImageProcessor, 224 x 224 for the released
  ``microsoft/udop-large``, whose config's ``image_size`` is 224): ``pixel_values`` ``[B, C, s, s]``;
- each text token's word box, "normalized to the range [0, 1000]" (processing_udop.py docstring), as integers:
  ``bbox`` ``[B, seq, 4]`` (x0, y0, x1, y1);
- the target text as ``labels`` ``[B, target]`` (``--target-len``, else ``--seq-len``); the model shifts them into
  ``decoder_input_ids``.

Page layout of the recipe: the ``seq`` tokens are words on ``WORDS_PER_LINE``-word lines, top to bottom, each word
box one column wide and one line high in the 0..1000 frame. The boxes are known values (a KnownInput): the model
drops the image patches its tokens' box centres fall on (modeling_udop.py ``combine_image_text_embeddings``, which
reads the boxes as fractions of the page, ``clip(floor(centre * num_patches))``), so the encoder's length depends
on them, the same on meta and for real.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import InputSpec

BOX_SCALE = 1000  # processing_udop.py: "bounding boxes normalized to the range [0, 1000]"
WORDS_PER_LINE = 10  # the recipe's page: 10 words a line
LINE_HEIGHT = 20  # in the 0..1000 frame: 50 lines fill a page


def is_document(cfg, cls) -> bool:
    """A class that takes text tokens with word boxes and the page image (UDOP)."""
    if cls is None or not isinstance(getattr(cfg, "image_size", None), int):
        return False
    params = inspect.signature(cls.forward).parameters
    return all(p in params for p in ("bbox", "pixel_values", "labels"))


def word_boxes(b: int, seq: int) -> torch.Tensor:
    """``[b, seq, 4]`` int64 word boxes in the 0..1000 frame, ``WORDS_PER_LINE`` words a line."""
    i = torch.arange(seq)
    col, line = i % WORDS_PER_LINE, (i // WORDS_PER_LINE) % (BOX_SCALE // LINE_HEIGHT)
    width = BOX_SCALE // WORDS_PER_LINE
    box = torch.stack([col * width, line * LINE_HEIGHT, (col + 1) * width, (line + 1) * LINE_HEIGHT], dim=-1)
    return box.to(torch.int64).unsqueeze(0).expand(b, seq, 4).clone()


def document_inputs(cfg, b: int, seq: int, target: int, images: int, size: tuple[int, int], dtype, text_ids,
                    target_ids, known, image_input) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch: ``text_ids`` ``[b, seq]`` and ``target_ids`` ``[b, target]`` ordinary ids."""
    if images != 1:
        raise MemgraphError(f"--images {images}: {cfg.model_type} takes one page image per sample: drop --images")
    native = (cfg.image_size, cfg.image_size)
    if size != native:
        raise MemgraphError(f"{cfg.model_type}'s page image is {native[0]}x{native[1]} (its processor resizes to "
                            f"that); got --image-size {size[0]}x{size[1]}: pass --image-size {native[0]}")
    channels = getattr(cfg, "num_channels", None) or 3
    inputs = [known("input_ids", text_ids), known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
              known("bbox", word_boxes(b, seq)), image_input("pixel_values", (b, channels, *native), dtype),
              known("labels", target_ids)]
    patches = (native[0] // cfg.patch_size) ** 2
    note = (f"a {native[0]}x{native[1]} page ({patches} image patches) and {seq} tokens with word boxes, "
            f"{WORDS_PER_LINE} words a line; a {target}-token target")
    return inputs, note


__all__ = ["BOX_SCALE", "WORDS_PER_LINE", "document_inputs", "is_document", "word_boxes"]
