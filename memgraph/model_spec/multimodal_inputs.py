"""Inputs of image-text models, laid out the way their processors make them.

Task ``image-text-to-text`` (``TASKS`` in ``tasks.py``) picks one of two layouts from the config:

**LLaVA** (a CLIP-style vision tower with a fixed image size; ``vision_feature_select_strategy``
in the config). Per sample, ``--images N`` images (default: zoo ``defaults.images``, else 1),
each replaced by ``(image_size / patch_size)^2`` image tokens (576 for 336 px / 14 px
patches: the ``"default"`` strategy drops the CLS feature; ``"full"`` keeps it, one more token),
as ``LlavaProcessor`` expands ``<image>``. Tokens per sample::

    [BOS] ([image] * T  [text]) * N  [text ...]           (seq_len tokens in all)

``pixel_values`` is ``[B*N, C, H, W]``; ``attention_mask`` is all ones; ``labels`` are the
``input_ids`` with the image positions set to the ignore index (-100), as LLaVA training does.

**Qwen2-VL** (dynamic resolution; ``spatial_merge_size`` and ``temporal_patch_size`` in the
vision config). ``--image-size H`` or ``HxW`` is resized as the image processor does
(``smart_resize``: multiples of ``patch * merge`` = 28 px, pixel count kept in
[56*56, 28*28*1280]), giving a grid of ``(H/14) x (W/14)`` patches per image. An image is one
temporal patch (``grid_t = 1``; the processor repeats the frame ``temporal_patch_size`` times).
Per image the model takes ``H/14 * W/14`` rows of ``pixel_values`` with
``C * temporal_patch_size * 14 * 14`` values each (``[sum of patches, 1176]`` in all), one row
``[1, H/14, W/14]`` of ``image_grid_thw``, and ``(H/14 * W/14) / merge^2`` visual tokens in the
text. Tokens per sample::

    [text] ([vision_start] [image_pad] * T [vision_end]) * N  [text ...]

``mm_token_type_ids`` marks the ``image_pad`` positions with 1 (as the processor does),
``attention_mask`` is all ones, ``labels`` ignore the vision tokens.

Every integer input here is a :class:`KnownInput`: its values are fixed by the layout, the
same on every device. On ``meta`` it is made empty and the tracer attaches the values as a
shadow (``memgraph.trace.shadow_values``), so the models' value-dependent code runs as it would for
real; ``memgraph measure`` gets the very same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import Batch, InputSpec
from memgraph.model_spec.options import TrainingOptions

LONG = torch.int64
IGNORE_INDEX = -100  # labels at this value are left out of the loss (PyTorch's cross-entropy default)
TEXT_SEED = 0  # text token ids are drawn from their own generator: identical on meta and for real
# Qwen2-VL image processor defaults (min_pixels / max_pixels of Qwen2VLImageProcessor).
QWEN2VL_MIN_PIXELS = 56 * 56
QWEN2VL_MAX_PIXELS = 28 * 28 * 1280


@dataclass(frozen=True)
class KnownInput(InputSpec):
    """An integer input whose values the task fixes: uninitialised on meta (values via :meth:`value`)."""

    values: torch.Tensor | None = field(default=None, compare=False, repr=False)

    def value(self) -> torch.Tensor:
        """The input's values on the CPU."""
        return self.values.clone()

    def make(self, device, generator=None) -> torch.Tensor:
        if torch.device(device).type == "meta":
            return torch.empty(self.shape, dtype=self.dtype, device=device)
        return self.values.to(device=device, dtype=self.dtype, copy=True)


def image_hw(size) -> tuple[int, int]:
    """``448`` -> (448, 448); ``(448, 672)`` / ``"448x672"`` -> (448, 672)."""
    if isinstance(size, str):
        parts = size.lower().replace("×", "x").split("x")
        try:
            size = tuple(int(p) for p in parts) if len(parts) > 1 else int(parts[0])
        except ValueError:
            raise MemgraphError(f"image size {size!r} does not parse: pass --image-size N or HxW") from None
    if isinstance(size, int):
        return size, size
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(v, int) for v in size):
        return int(size[0]), int(size[1])
    raise MemgraphError(f"image size {size!r} is not N or HxW: pass --image-size 448 or 448x672")


def image_text_to_text(cfg, opts: TrainingOptions, defaults: dict, dtype: torch.dtype):
    """Batch for an image-text model: LLaVA or Qwen2-VL layout, picked from the config."""
    vision = getattr(cfg, "vision_config", None)
    if vision is not None and hasattr(vision, "spatial_merge_size") and hasattr(vision, "temporal_patch_size"):
        inputs = _qwen2_vl(cfg, opts, defaults, dtype)
    elif vision is not None and hasattr(cfg, "vision_feature_select_strategy"):
        inputs = _llava(cfg, opts, defaults, dtype)
    else:
        raise MemgraphError(
            f"no image-text input layout for model_type {getattr(cfg, 'model_type', '?')!r}: LLaVA-style "
            "(vision_feature_select_strategy) and Qwen2-VL-style (spatial_merge_size) configs are supported; "
            "describe the inputs with --input"
        )
    return Batch(tuple(inputs), {})


# -- shared pieces -----------------------------------------------------------------------------
def _images(opts: TrainingOptions, defaults: dict) -> int:
    n = getattr(opts, "images", None) or defaults.get("images") or 1
    return int(n)


def _seq(opts: TrainingOptions, defaults: dict) -> int:
    s = opts.seq_len or defaults.get("seq_len")
    if s is None:
        raise MemgraphError("no default sequence length for this model: pass --seq-len")
    return s


def _specials(cfg) -> set[int]:
    names = ("image_token_id", "image_token_index", "video_token_id", "vision_start_token_id",
             "vision_end_token_id", "vision_token_id", "pad_token_id", "bos_token_id", "eos_token_id")
    out = set()
    for c in (cfg, cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg):
        for n in names:
            v = getattr(c, n, None)
            for x in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(x, int):
                    out.add(x)
    return out


def _text_ids(n: int, vocab: int, specials: set[int], generator: torch.Generator) -> torch.Tensor:
    """``n`` ordinary token ids (no special or multimodal token among them)."""
    ids = torch.randint(3, max(vocab, 4), (n,), generator=generator, dtype=LONG)
    if specials:
        safe = next(i for i in range(3, vocab + 3) if i not in specials)
        ids[torch.isin(ids, torch.tensor(sorted(specials), dtype=LONG))] = safe
    return ids


def _too_short(seq: int, need: int, what: str) -> MemgraphError:
    return MemgraphError(f"--seq-len {seq} cannot hold {what} ({need} tokens with the text around them): "
                         f"pass --seq-len {need + 1} or more, or fewer --images")


def _known(name: str, values: torch.Tensor) -> KnownInput:
    return KnownInput(name, tuple(values.shape), values.dtype, None, values)


# -- LLaVA -------------------------------------------------------------------------------------
def llava_image_tokens(cfg) -> int:
    """Image tokens per image in the text: patches, plus CLS for the "full" feature strategy."""
    v = cfg.vision_config
    tokens = (v.image_size // v.patch_size) ** 2
    return tokens + 1 if cfg.vision_feature_select_strategy == "full" else tokens


def _llava(cfg, opts, defaults, dtype) -> list[InputSpec]:
    vision, text = cfg.vision_config, cfg.get_text_config()
    native = vision.image_size
    requested = opts.image_size or defaults.get("image_size") or native
    h, w = image_hw(requested)
    if (h, w) != (native, native):
        raise MemgraphError(
            f"this LLaVA's vision tower takes {native}x{native} images (its processor resizes to that); "
            f"got --image-size {h}x{w}: pass --image-size {native}"
        )
    b, n, seq = opts.batch_size, _images(opts, defaults), _seq(opts, defaults)
    per_image = llava_image_tokens(cfg)
    need = 1 + n * (per_image + 1)
    if seq < need:
        raise _too_short(seq, need, f"{n} image(s) of {per_image} tokens")
    image_id = cfg.image_token_id
    bos = getattr(text, "bos_token_id", None)
    bos = bos if isinstance(bos, int) else 1
    gen = torch.Generator().manual_seed(TEXT_SEED)
    ids = _text_ids(b * seq, text.vocab_size, _specials(cfg), gen).view(b, seq)
    ids[:, 0] = bos
    image_mask = torch.zeros(b, seq, dtype=torch.bool)
    pos = 1
    for _ in range(n):
        image_mask[:, pos:pos + per_image] = True
        pos += per_image + 1  # one text token (the newline after <image>) follows each image
    ids[image_mask] = image_id
    labels = ids.masked_fill(image_mask, IGNORE_INDEX)
    channels = getattr(vision, "num_channels", 3)
    return [
        _known("input_ids", ids),
        InputSpec("pixel_values", (b * n, channels, native, native), dtype),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", labels),
    ]


# -- Qwen2-VL ----------------------------------------------------------------------------------
def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = QWEN2VL_MIN_PIXELS,
                 max_pixels: int = QWEN2VL_MAX_PIXELS) -> tuple[int, int]:
    """Qwen2-VL's image processor resize: sides multiples of ``factor``, pixel count in range, aspect kept."""
    if max(height, width) / min(height, width) > 200:
        raise MemgraphError(f"image {height}x{width}: Qwen2-VL's processor refuses aspect ratios above 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen2_vl_grid(cfg, size) -> tuple[int, int, int]:
    """(grid_h, grid_w, visual tokens) of one image of ``size`` (N or (H, W)) after the processor's resize."""
    v = cfg.vision_config
    patch, merge = _one(v.patch_size), v.spatial_merge_size
    h, w = smart_resize(*image_hw(size), factor=patch * merge)
    gh, gw = h // patch, w // patch
    return gh, gw, gh * gw // (merge * merge)


def _one(v) -> int:
    return int(v[0]) if isinstance(v, (list, tuple)) else int(v)


def _qwen2_vl(cfg, opts, defaults, dtype) -> list[InputSpec]:
    v = cfg.vision_config
    size = opts.image_size or defaults.get("image_size")
    if size is None:
        raise MemgraphError("no default image size for this model: pass --image-size N or HxW")
    gh, gw, per_image = qwen2_vl_grid(cfg, size)
    b, n, seq = opts.batch_size, _images(opts, defaults), _seq(opts, defaults)
    need = 1 + n * (per_image + 2)
    if seq < need:
        raise _too_short(seq, need, f"{n} image(s) of {per_image} visual tokens")
    gen = torch.Generator().manual_seed(TEXT_SEED)
    text = cfg.get_text_config()
    ids = _text_ids(b * seq, text.vocab_size, _specials(cfg), gen).view(b, seq)
    image_mask = torch.zeros(b, seq, dtype=torch.bool)
    vision_tokens = torch.zeros(b, seq, dtype=torch.bool)
    pos = 1
    for _ in range(n):
        ids[:, pos] = cfg.vision_start_token_id
        image_mask[:, pos + 1:pos + 1 + per_image] = True
        ids[:, pos + 1 + per_image] = cfg.vision_end_token_id
        vision_tokens[:, pos:pos + per_image + 2] = True
        pos += per_image + 2
    ids[image_mask] = cfg.image_token_id
    labels = ids.masked_fill(vision_tokens, IGNORE_INDEX)
    channels = getattr(v, "in_channels", None) or getattr(v, "in_chans", 3)
    patch, temporal = _one(v.patch_size), _one(v.temporal_patch_size)
    grid = torch.tensor([[1, gh, gw]] * (b * n), dtype=LONG)
    return [
        _known("input_ids", ids),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("mm_token_type_ids", image_mask.to(LONG)),
        InputSpec("pixel_values", (b * n * gh * gw, channels * temporal * patch * patch), dtype),
        _known("image_grid_thw", grid),
        _known("labels", labels),
    ]


__all__ = ["KnownInput", "image_text_to_text", "image_hw", "smart_resize", "qwen2_vl_grid", "llava_image_tokens"]
