"""Pix2Struct and Kosmos-2.5: an image as ``flattened_patches``, variable-resolution patches padded to a budget.

Pix2StructImageProcessor (image_processing_pix2struct.py, transformers 5.23; ``patch_size`` 16 x 16,
``max_patches`` 2048) keeps the image's aspect ratio and scales it so that its patches fit the budget::

    scale = sqrt(max_patches * (p / H) * (p / W))
    rows = max(min(int(scale * H / p), max_patches), 1);  cols likewise with W

then each of the ``rows * cols`` patches is a row ``[row id, col id, p * p * C values]`` (ids from 1; 0 marks
padding) and the rows are zero-padded to ``max_patches``; ``attention_mask`` is 1 on the real patches. The model
(modeling_pix2struct.py ``Pix2StructVisionEmbeddings``) reads the two ids back as embedding indices and projects
the rest by ``Linear(patch_embed_hidden_size, hidden)``: a row is ``2 + patch_embed_hidden_size`` wide. The text
is the decoder's target (the model shifts ``labels`` into ``decoder_input_ids``).

Kosmos-2.5 (image_processing_kosmos2_5.py: the same patches, ``max_patches`` 4096; its vision model finds the
real patches itself, ``flattened_patches.sum(-1) != 0``) is decoder-only: processing_kosmos2_5.py writes
``<s><image>`` then ``num_image_tokens`` (the config's ``latent_query_num``, 2048) image tokens then ``</image>``
before the text, with ``image_embeds_position_mask`` ``[0, -1, 1 x N, -1, 0 ...]`` (the model puts its latents
where it is 1); no loss on the image part here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import InputSpec

LONG = torch.int64
PATCH = 16  # Pix2StructImageProcessor.patch_size {"height": 16, "width": 16}
MAX_PATCHES = 2048  # Pix2StructImageProcessor.max_patches
KOSMOS25_MAX_PATCHES = 4096  # Kosmos2_5ImageProcessor.max_patches


def is_flattened_patches(cfg, cls) -> bool:
    """A vision config with ``patch_embed_hidden_size`` and a model whose forward takes ``flattened_patches`` and
    ``decoder_input_ids`` (Pix2Struct)."""
    vision = getattr(cfg, "vision_config", None)
    if vision is None or cls is None or not isinstance(getattr(vision, "patch_embed_hidden_size", None), int):
        return False
    params = inspect.signature(cls.forward).parameters
    return "flattened_patches" in params and ("decoder_input_ids" in params or _is_kosmos25(cls))


def _is_kosmos25(cls) -> bool:
    return "image_embeds_position_mask" in inspect.signature(cls.forward).parameters


def patch_grid(height: int, width: int, max_patches: int = MAX_PATCHES, patch: int = PATCH) -> tuple[int, int]:
    """(rows, cols) of the processor's patches for a ``height x width`` image."""
    scale = (max_patches * (patch / height) * (patch / width)) ** 0.5
    rows = max(min(int(scale * height / patch), max_patches), 1)
    cols = max(min(int(scale * width / patch), max_patches), 1)
    return rows, cols


@dataclass(frozen=True)
class FlattenedPatches(InputSpec):
    """``[b, max_patches, 2 + D]``: on a real device the row and column ids of the ``rows x cols`` real patches
    (from 1), pixel values beside them, zeros on the padding; uninitialised on meta (the ids only index embeddings,
    whose output shape does not depend on them)."""

    rows: int = 1
    cols: int = 1

    def make(self, device, generator=None) -> torch.Tensor:
        if torch.device(device).type == "meta":
            return torch.empty(self.shape, dtype=self.dtype, device=device)
        b, slots, width = self.shape
        out = torch.zeros(b, slots, width)
        real = self.rows * self.cols
        out[:, :real, 0] = (torch.arange(self.rows).repeat_interleave(self.cols) + 1).float()
        out[:, :real, 1] = (torch.arange(self.cols).repeat(self.rows) + 1).float()
        # the processor standardises each image (per-image mean 0, std 1): normal values stand in for them
        out[:, :real, 2:] = torch.randn(b, real, width - 2, generator=generator)
        return out.to(device=device, dtype=self.dtype)


def flattened_patch_inputs(cfg, opts, defaults: dict, dtype: torch.dtype, kit) -> list[InputSpec]:
    """``kit``: multimodal_inputs.py's shared pieces."""
    from memgraph.model_spec.image_tokens import model_class_for
    from memgraph.model_spec.inputs import IGNORE_INDEX

    _known, _seq, _too_short, image_hw, sample_text_ids = (kit.known, kit.seq, kit.too_short, kit.image_hw,
                                                           kit.sample_text_ids)

    kosmos = _is_kosmos25(model_class_for(cfg))
    budget = KOSMOS25_MAX_PATCHES if kosmos else MAX_PATCHES
    size = opts.image_size or defaults.get("image_size")
    if size is None:
        raise MemgraphError(f"{cfg.model_type}'s processor takes images of any size (patches up to {budget}): "
                            "pass --image-size N or HxW")
    if getattr(opts, "images", None) not in (None, 1):
        raise MemgraphError(f"--images {opts.images}: {cfg.model_type} takes one image per sample: drop --images")
    h, w = image_hw(size)
    rows, cols = patch_grid(h, w, budget)
    b, seq = opts.batch_size, _seq(opts, defaults)
    ids, _ = sample_text_ids(cfg, b, seq)
    width = 2 + int(cfg.vision_config.patch_embed_hidden_size)
    patches = FlattenedPatches("flattened_patches", (b, budget, width), dtype, rows=rows, cols=cols)
    if not kosmos:
        mask = torch.zeros(b, budget, dtype=LONG)
        mask[:, :rows * cols] = 1
        return [patches, _known("attention_mask", mask), _known("labels", ids)]
    latents = int(cfg.latent_query_num)
    if seq < latents + 4:
        raise _too_short(seq, latents + 4, f"{latents} image tokens")
    bos = getattr(cfg.get_text_config(), "bos_token_id", None)
    ids[:, 0] = bos if isinstance(bos, int) else 0
    position = torch.zeros(b, seq, dtype=LONG)
    position[:, 1] = position[:, latents + 2] = -1  # <image>, </image>
    position[:, 2:latents + 2] = 1
    return [
        _known("input_ids", ids),
        patches,
        _known("image_embeds_position_mask", position),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", ids.masked_fill(position != 0, IGNORE_INDEX)),
    ]


__all__ = ["FlattenedPatches", "KOSMOS25_MAX_PATCHES", "MAX_PATCHES", "PATCH", "flattened_patch_inputs", "is_flattened_patches", "patch_grid"]
