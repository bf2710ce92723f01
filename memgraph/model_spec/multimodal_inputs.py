"""Inputs of image-text models, laid out the way their processors make them.

Task ``image-text-to-text`` (``TASKS`` in ``tasks.py``) picks a layout from the config: the two below, Mllama's
cross-attention (cross_attention_inputs.py), InstructBLIP-Video's query video, and models whose text holds no image
token (BLIP, GIT, Kosmos-2: vision_prefix_inputs.py). The two main ones:

**LLaVA** (a CLIP-style vision tower with a fixed image size; ``vision_feature_select_strategy``
in the config). Per sample, ``--images N`` images (default: zoo ``defaults.images``, else 1),
each replaced by ``(image_size / patch_size)^2`` image tokens (576 for 336 px / 14 px
patches: the ``"default"`` strategy drops the CLS feature; ``"full"`` keeps it, one more token),
as ``LlavaProcessor`` expands ``<image>``. Tokens per sample::

    [BOS] ([image] * T  [text]) * N  [text ...]           (seq_len tokens in all)

``pixel_values`` is ``[B*N, C, H, W]`` (``[B, N, C, H, W]`` for Idefics 2/3 and SmolVLM), an :class:`ImageInput`:
every image is a real image, none a processor's all-zero padding image (declared to the trace, see the class);
``attention_mask`` is all ones; ``labels`` are the
``input_ids`` with the image positions set to the ignore index (-100), as LLaVA training does.
Any-resolution models (LLaVA-NeXT, LLaVA-OneVision, LLaVA-NeXT-Video: ``image_grid_pinpoints`` in the config)
take ``--image-size`` as the image's own size: ``pixel_values`` ``[B*N, tiles, C, s, s]`` with the tiles their
processor cuts, ``image_sizes`` ``[B*N, 2]``, and the report's notes state the tiles (anyres.py).

**Qwen2-VL** (dynamic resolution; ``spatial_merge_size`` and ``temporal_patch_size`` in the
vision config). ``--image-size H`` or ``HxW`` is resized as the image processor does
(``smart_resize``: multiples of ``patch * merge`` = 28 px, pixel count kept in
[min_pixels, max_pixels]: ``--min-pixels`` / ``--max-pixels``, else the released checkpoint's
preprocessor_config.json figures in the zoo entry, else the class default 56*56 .. 28*28*1280;
model_spec/pixel_budget.py), giving a grid of ``(H/14) x (W/14)`` patches per image. An image is one
temporal patch (``grid_t = 1``; the processor repeats the frame ``temporal_patch_size`` times).
Per image the model takes ``H/14 * W/14`` rows of ``pixel_values`` with
``C * temporal_patch_size * 14 * 14`` values each (``[sum of patches, 1176]`` in all), one row
``[1, H/14, W/14]`` of ``image_grid_thw``, and ``(H/14 * W/14) / merge^2`` visual tokens in the
text. Tokens per sample::

    [text] ([vision_start] [image_pad] * T [vision_end]) * N  [text ...]

``mm_token_type_ids`` marks the ``image_pad`` positions with 1 (as the processor does),
``attention_mask`` is all ones, ``labels`` ignore the vision tokens. An omni thinker (Qwen2.5-Omni: a grid model
whose forward takes ``input_features``) with ``--audio-seconds`` also gets ``[audio_start] [audio] * A
[audio_end]`` after the vision tokens and the ``input_features`` / ``feature_attention_mask`` its processor makes
(audio_text_inputs.py ``image_text_with_audio``).

Every integer input here is a :class:`KnownInput`: its values are fixed by the layout, the
same on every device. On ``meta`` it is made empty and the tracer attaches the values as a
shadow (``memgraph.trace.shadow_values``), so the models' value-dependent code runs as it would for
real; ``memgraph measure`` gets the very same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.anyres import describe as describe_tiles, is_anyres
from memgraph.model_spec.cell_grid import cell_grid, cell_shape, is_cell_grid
from memgraph.model_spec.cross_attention_inputs import cross_attention_batch, is_cross_attention
from memgraph.model_spec.image_tokens import high_res_size, image_tokens_per_image, model_class_for, processor_size
from memgraph.model_spec.flattened_patches import flattened_patch_inputs, is_flattened_patches
from memgraph.model_spec.image_attention_inputs import image_attention_inputs, is_image_attention
from memgraph.model_spec.inputs import IGNORE_INDEX, Batch, InputSpec
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.patch_row_inputs import is_patch_rows
from memgraph.model_spec.patch_row_inputs import patch_grid as fuyu_grid
from memgraph.model_spec.patch_row_inputs import tokens_per_image as fuyu_tokens
from memgraph.model_spec.text_only_inputs import is_text_only, text_only_inputs
from memgraph.model_spec.document_inputs import document_inputs, is_document
from memgraph.model_spec.merge_size_inputs import is_merge_sizes, merge_size_inputs
from memgraph.model_spec.global_view_inputs import global_view_inputs, is_global_view
from memgraph.model_spec.patch_budget_inputs import is_patch_budget, patch_budget_inputs
from memgraph.model_spec.patch_token_inputs import is_patch_tokens, patch_token_inputs
from memgraph.model_spec.robot_policy_inputs import is_policy, policy_inputs
from memgraph.model_spec.protein_text_inputs import is_protein_text, protein_text_inputs
from memgraph.model_spec.soft_token_patches import VIDEO_MAX_SOFT_TOKENS, is_soft_token_patches, soft_tokens
from memgraph.model_spec.soft_token_patches import patch_inputs as soft_patch_inputs
from memgraph.model_spec.vision_backend import missing_vision_backend
from memgraph.model_spec.vq_tokens import is_vq_tokens, processed_size, resizes_by_pixels
from memgraph.model_spec.navit_slices import is_navit_slices, navit_inputs
from memgraph.model_spec.naflex_tiles import is_naflex_tiles, naflex_inputs
from memgraph.model_spec.overlap_crops import is_overlap_crops, overlap_crop_inputs
from memgraph.model_spec.lossless_heads import missing_training_loss
from memgraph.model_spec.video_inputs import (
    fixed_size_video, frame_groups, frames_as_images, omni_second_per_grid, takes_video, video_span,
)
from memgraph.model_spec.vision_prefix_inputs import is_vision_prefix, vision_prefix_inputs
from memgraph.model_spec.patch_grid import grid_tokens, is_patch_grid, merge_of, patch_row_shape, temporal_of
from memgraph.model_spec.pixel_budget import CLASS_MAX_PIXELS, CLASS_MIN_PIXELS, pixel_budget, refuse_pixel_flags

LONG = torch.int64
TEXT_SEED = 0  # text token ids are drawn from their own generator: identical on meta and for real
# Qwen2-VL image processor class defaults (min_pixels / max_pixels of Qwen2VLImageProcessor; pixel_budget.py).
QWEN2VL_MIN_PIXELS = CLASS_MIN_PIXELS
QWEN2VL_MAX_PIXELS = CLASS_MAX_PIXELS


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


# Idefics 2/3 and SmolVLM processors normalise with IMAGENET_STANDARD_MEAN / _STD (transformers image_utils.py:
# 0.5, 0.5) after rescaling 8-bit pixels by 1/255 (image_processing_idefics3.py): (k / 255 - 0.5) / 0.5.
PIXEL_LEVELS = 256
PIXEL_MEAN = 0.5
PIXEL_STD = 0.5
# A declared value fact (ImageInput.value_facts, read by trace/shadow_values.py): no element is exactly 0.0.
NO_ZERO = "no_zero"


@dataclass(frozen=True)
class ImageInput(InputSpec):
    """``pixel_values`` of real images: made on a real device as a processor makes them from 8-bit pixels,
    ``(k / 255 - 0.5) / 0.5`` for k in [0, 255], so no element is 0.0 (k / 255 = 0.5 has no integer k) and no
    image is the all-zero padding image that Idefics 2/3 and SmolVLM drop in ``get_image_features``
    (modeling_idefics3.py ``real_images_inds``). On meta the values are unknown; :meth:`value_facts` declares
    the no-zero fact to the trace (trace/shadow_values.py ``NO_ZERO``), which answers those models' padding test
    and says so in the notes."""

    def value_facts(self) -> tuple[str, ...]:
        return (NO_ZERO,)

    def make(self, device, generator=None) -> torch.Tensor:
        if torch.device(device).type == "meta":
            return torch.empty(self.shape, dtype=self.dtype, device=device)
        k = torch.randint(0, PIXEL_LEVELS, self.shape, generator=generator)
        pixels = (k.to(torch.float32) / (PIXEL_LEVELS - 1) - PIXEL_MEAN) / PIXEL_STD
        return pixels.to(device=device, dtype=self.dtype)


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


class NoImageTextLayout(MemgraphError):
    """The config matches none of the layouts below: memgraph has no input recipe for this model."""


# layouts whose module takes (cfg, opts, defaults, dtype, kit) and returns (inputs, its note)
_NOTED_LAYOUTS = {"global-view": global_view_inputs, "patch-budget": patch_budget_inputs, "policy": policy_inputs,
                  "patch-tokens": patch_token_inputs}


def image_text_to_text(cfg, opts: TrainingOptions, defaults: dict, dtype: torch.dtype, audio=None):
    """Batch for an image-text model: the grid (Qwen2-VL) or fixed-size (LLaVA) layout, picked from the config;
    ``audio``: an omni thinker's clip (audio_text_inputs.py ``image_text_with_audio``), grid layout only."""
    layout = layout_of(cfg)
    if audio is not None and layout != "grid":
        raise MemgraphError(f"--audio-seconds: memgraph lays out audio beside images for Qwen2-VL-style (grid) omni "
                            f"thinkers only, not {getattr(cfg, 'model_type', '?')}: drop --audio-seconds")
    if layout not in ("grid", "merge-sizes") and not resizes_by_pixels(cfg):  # (patch-budget: its budget is in
        refuse_pixel_flags(opts, getattr(cfg, "model_type", "?"))      # patches; Emu3 resizes by pixel count, vq_tokens.py)
    notes = ()
    if getattr(opts, "video_frames", None) and layout in ("text-only", "document", "protein", "patch-tokens", "policy",
                                                           "global-view", "cross", "prefix", "patch-rows", "fixed",
                                                           "image-attention", "flattened", "navit", "naflex") \
            and not (layout == "fixed" and takes_video(cfg)):
        raise NoImageTextLayout(f"--video-frames: memgraph has no video input for {getattr(cfg, 'model_type', '?')} "
                            "(Qwen2-VL-style models, LLaVA-NeXT-Video, LLaVA-OneVision, Video-LLaVA and "
                            "InstructBLIP-Video take one): drop --video-frames")
    if layout == "navit":
        inputs = navit_inputs(cfg, opts, defaults, dtype, _kit())
    elif layout == "naflex":
        inputs = naflex_inputs(cfg, opts, defaults, dtype, _kit())
    elif layout == "overlap-crops":
        inputs, note = overlap_crop_inputs(cfg, opts, defaults, dtype, _kit())
        notes = (note,)
    elif layout == "query-video":
        inputs = _query_video(cfg, opts, defaults, dtype)
    elif layout == "document":
        inputs, note = _document(cfg, opts, defaults, dtype)
        notes = (note,)
    elif layout in _NOTED_LAYOUTS:  # the layouts in their own modules that return (inputs, note)
        inputs, note = _NOTED_LAYOUTS[layout](cfg, opts, defaults, dtype, _kit())
        notes = (note,)
    elif layout == "merge-sizes":
        inputs, note = merge_size_inputs(cfg, opts, defaults, dtype, _kit(), smart_resize)
        notes = (note,)
    elif layout == "protein":
        b, seq = opts.batch_size, _seq(opts, defaults)
        ids, gen = sample_text_ids(cfg, b, seq)
        inputs, note = protein_text_inputs(cfg, b, seq, getattr(opts, "images", None), ids, gen, _known)
        notes = (note,)
    elif layout == "text-only":
        b, seq = opts.batch_size, _seq(opts, defaults)
        inputs, note = text_only_inputs(cfg, model_class_for(cfg), b, seq, getattr(opts, "images", None),
                                        sample_text_ids(cfg, b, seq)[0], _known)
        notes = (note,)
    elif layout == "cross":
        inputs, note = _cross_attention(cfg, opts, defaults, dtype)
        notes = (note,)
    elif layout == "grid":
        inputs = _qwen2_vl(cfg, opts, defaults, dtype, audio)
    elif layout == "prefix":
        inputs = _prefix(cfg, opts, defaults, dtype)
    elif layout == "image-attention":
        inputs = image_attention_inputs(cfg, opts, defaults, dtype, _kit())
    elif layout == "flattened":
        inputs = flattened_patch_inputs(cfg, opts, defaults, dtype, _kit())
    elif layout == "patch-rows":
        inputs = _patch_rows(cfg, opts, defaults, dtype)
    elif layout == "soft":
        inputs = _soft_tokens(cfg, opts, defaults, dtype)
    elif layout == "fixed" and getattr(opts, "video_frames", None) and takes_video(cfg):
        inputs = fixed_size_video(cfg, opts, defaults, dtype, _kit())  # LLaVA-NeXT-Video, OneVision, Video-LLaVA
    elif layout == "fixed":
        inputs = _fixed_size(cfg, opts, defaults, dtype)
        if is_anyres(cfg):
            h, w = image_hw(opts.image_size or defaults.get("image_size") or _native_size(cfg.vision_config))
            notes = (describe_tiles(cfg, model_class_for(cfg), h, w),)
    else:
        no_loss = missing_training_loss(model_class_for(cfg))
        if no_loss:  # DiffusionGemma: no loss in transformers, images only as encoder outputs (lossless_heads.py)
            raise NoImageTextLayout(no_loss)
        missing = missing_vision_backend(cfg)
        if missing:
            raise NoImageTextLayout(f"{getattr(cfg, 'model_type', '?')}'s vision tower needs a package memgraph does "
                                    f"not install ({missing})")
        raise NoImageTextLayout(
            f"no image-text input layout for model_type {getattr(cfg, 'model_type', '?')!r}: configs with a "
            "vision_config of a fixed image_size and an image token id (LLaVA-style) and configs with "
            "spatial_merge_size and temporal_patch_size (Qwen2-VL-style), or a fixed-size vision tower and no image "
            "token (BLIP, GIT, Kosmos-2) are supported; describe the inputs with --input"
        )
    return Batch(tuple(inputs), {}, notes=notes)


def image_runs(cfg, b: int, seq: int, n: int, per_image: int, image_id: int, bos_fallback: int | None = None):
    """Sampled text ids ``[b, seq]`` laid out as BOS, then ``n`` runs of ``per_image`` image tokens, each followed
    by one text token (the newline after ``<image>``); ``bos_fallback`` replaces a config without an int BOS id
    (None: keep the sampled id). Refuses a ``seq`` too short for them. Returns ``(ids, generator, image_mask)``."""
    need = 1 + n * (per_image + 1)
    if seq < need:
        raise _too_short(seq, need, f"{n} image(s) of {per_image} tokens")
    ids, gen = sample_text_ids(cfg, b, seq)
    bos = getattr(cfg.get_text_config(), "bos_token_id", None)
    bos = bos if isinstance(bos, int) else bos_fallback
    if bos is not None:
        ids[:, 0] = bos
    image_mask = torch.zeros(b, seq, dtype=torch.bool)
    for i in range(n):
        start = 1 + i * (per_image + 1)
        image_mask[:, start:start + per_image] = True
    ids[image_mask] = image_id
    return ids, gen, image_mask


def _kit() -> SimpleNamespace:
    """The shared pieces the layouts in their own modules (video_inputs.py, image_attention_inputs.py,
    flattened_patches.py) build a batch with, handed to them (they do not import this module)."""
    return SimpleNamespace(known=_known, image_input=ImageInput, image_hw=image_hw, native_size=_native_size,
                           seq=_seq, images=_images, too_short=_too_short, sample_text_ids=sample_text_ids,
                           vision_of=vision_of, smart_resize=smart_resize, image_runs=image_runs)


def layout_of(cfg) -> str | None:
    """``"grid"``: a vision config with ``spatial_merge_size`` and ``temporal_patch_size`` (Qwen2-VL and the
    models built on its vision tower: pixel_values as rows of flattened patches plus ``image_grid_thw``);
    ``"fixed"``: a vision config with an ``image_size`` and an image token id in the config (LLaVA and the
    models whose processor resizes every image to that size); ``"prefix"``: a fixed-size tower and no image token
    (vision_prefix_inputs.py); else None."""
    if is_patch_rows(cfg):
        return "patch-rows"  # Fuyu: no vision tower, raw patches (patch_row_inputs.py)
    vision = vision_of(cfg)
    if vision is None and is_vq_tokens(cfg) and isinstance(_token(cfg, "image_token_id"), int):
        return "fixed"  # Chameleon: a VQ-GAN's codes as image tokens, the processor's fixed crop (vq_tokens.py)
    if vision is None and is_document(cfg, model_class_for(cfg)):
        return "document"  # UDOP: tokens with word boxes and the page image (document_inputs.py)
    if vision is None and is_policy(cfg, model_class_for(cfg)):
        return "policy"  # PI0: cameras, prompt, robot state and actions (robot_policy_inputs.py)
    if vision is None and is_protein_text(cfg, model_class_for(cfg)):
        return "protein"  # Evolla: a protein beside the text (protein_text_inputs.py)
    if vision is None:
        return "text-only" if is_text_only(cfg, model_class_for(cfg)) else None  # Mistral 4 (text_only_inputs.py)
    if is_merge_sizes(model_class_for(cfg)):
        return "merge-sizes"  # VideoLLaMA 3: its merge per image / video an input (merge_size_inputs.py)
    if is_navit_slices(cfg, model_class_for(cfg)) and isinstance(_token(cfg, "image_token_id"), int):
        return "navit"  # MiniCPM-V 4.6/4.7, MiniCPM-OCR: packed patch rows and target_sizes (navit_slices.py)
    if is_naflex_tiles(cfg) and isinstance(_token(cfg, "image_token_id"), int):
        return "naflex"  # LFM2-VL: padded NaFlex patch rows, spatial_shapes (naflex_tiles.py)
    if is_overlap_crops(cfg) and isinstance(_token(cfg, "image_token_id"), int):
        return "overlap-crops"  # Molmo 2: overlapping crops pooled by index lists, and video (overlap_crops.py)
    if is_flattened_patches(cfg, model_class_for(cfg)):
        return "flattened"  # Pix2Struct: variable-resolution patches in a budget (flattened_patches.py)
    if is_cross_attention(cfg, model_class_for(cfg)):
        return "cross"
    if isinstance(getattr(cfg, "num_query_tokens", None), int) and isinstance(_token(cfg, "video_token_index"), int) \
            and _native_size(vision) is not None:
        return "query-video"
    if hasattr(vision, "spatial_merge_size") and hasattr(vision, "temporal_patch_size") \
            and isinstance(_token(cfg, "image_token_id", "image_token_index"), int):
        return "grid"
    if is_global_view(cfg, model_class_for(cfg)) and isinstance(_token(cfg, "image_token_id"), int):
        return "global-view"  # DeepSeek-OCR 2: the page's global view (global_view_inputs.py)
    if is_patch_budget(model_class_for(cfg)) and isinstance(_token(cfg, "image_token_id"), int):
        return "patch-budget"  # Nemotron-H Omni: a grid in a patch budget, pixel-shuffled (patch_budget_inputs.py)
    if is_patch_tokens(cfg, model_class_for(cfg)) and isinstance(_token(cfg, "image_token_id"), int):
        return "patch-tokens"  # Inkling: one token per raw patch (patch_token_inputs.py)
    if is_soft_token_patches(cfg, model_class_for(cfg)) and isinstance(_token(cfg, "image_token_id"), int):
        return "soft"  # Gemma 4: patches in a fixed budget, pooled (soft_token_patches.py)
    if is_patch_grid(cfg, model_class_for(cfg)) and isinstance(_token(cfg, "image_token_id", "image_token_index"), int):
        return "grid"  # the same layout, its sizes named otherwise (patch_grid.py)
    if (_native_size(vision) or processor_size(cfg)) is not None \
            and isinstance(_token(cfg, "image_token_id", "image_token_index"), int):
        return "fixed"
    if _native_size(vision) is not None and _token(cfg, "image_token_id", "image_token_index") is None \
            and is_image_attention(cfg, model_class_for(cfg)):
        return "image-attention"  # Idefics 1: gated cross-attention by image_attention_mask (image_attention_inputs.py)
    if _native_size(vision) is not None and _token(cfg, "image_token_id", "image_token_index") is None \
            and is_vision_prefix(cfg, model_class_for(cfg)):
        return "prefix"  # no image token: the image enters beside the text (vision_prefix_inputs.py)
    return None


def vision_of(cfg):
    """The vision config: ``cfg.vision_config``, or the encoder's where an encoder-decoder keeps its vision tower in
    the encoder (T5Gemma 2: ``config.encoder.vision_config``, modeling_t5gemma2.py ``T5Gemma2Encoder``), or the
    encoder itself where it is the vision model (VisionEncoderDecoder: ``config.encoder`` a ViT/Swin/DeiT config
    with an ``image_size``, modeling_vision_encoder_decoder.py)."""
    vision = getattr(cfg, "vision_config", None)
    encoder = getattr(cfg, "encoder", None)
    if vision is None:
        vision = getattr(encoder, "vision_config", None)
    if vision is None and getattr(cfg, "decoder", None) is not None and _native_size(encoder) is not None:
        vision = encoder
    return vision


def _token(cfg, *names):
    """The first of ``names`` set on the config (or its text config) to an integer."""
    for c in (cfg, cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg):
        for n in names:
            v = getattr(c, n, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return None


def _native_size(vision) -> tuple[int, int] | None:
    size = getattr(vision, "image_size", None)
    if isinstance(size, int) and size > 0:
        return size, size
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) for v in size):
        return int(size[0]), int(size[1])
    return None


# -- shared pieces -----------------------------------------------------------------------------
def _images(opts: TrainingOptions, defaults: dict) -> int:
    n = getattr(opts, "images", None) or defaults.get("images") or 1
    return int(n)


def _seq(opts: TrainingOptions, defaults: dict) -> int:
    s = opts.seq_len or defaults.get("seq_len")
    if s is None:
        raise MemgraphError("no default sequence length for this model: pass --seq-len")
    return s


def special_token_ids(cfg) -> set[int]:
    names = ("image_token_id", "image_token_index", "video_token_id", "video_token_index", "vision_start_token_id",
             "vision_end_token_id", "vision_token_id", "pad_token_id", "bos_token_id", "eos_token_id",
             "audio_token_id", "audio_token_index", "audio_start_token_id", "audio_end_token_id")  # omni thinkers
    out = set()
    for c in (cfg, cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg):
        for n in names:
            v = getattr(c, n, None)
            for x in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(x, int):
                    out.add(x)
    return out


def sample_text_ids(cfg, b: int, seq: int, also_special: frozenset[int] = frozenset()
                    ) -> tuple[torch.Tensor, torch.Generator]:
    """``[b, seq]`` ordinary token ids of ``cfg``'s text vocabulary (none of its special tokens, nor
    ``also_special``), drawn from a generator seeded with ``TEXT_SEED``; and that generator, for later draws."""
    gen = torch.Generator().manual_seed(TEXT_SEED)
    specials = special_token_ids(cfg) | also_special
    return random_text_ids(b * seq, cfg.get_text_config().vocab_size, specials, gen).view(b, seq), gen


def random_text_ids(n: int, vocab: int, specials: set[int], generator: torch.Generator) -> torch.Tensor:
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


def _fixed_size(cfg, opts, defaults, dtype) -> list[InputSpec]:
    """LLaVA's layout for any model whose processor resizes every image to the vision tower's ``image_size``;
    the image tokens per image are the feature rows of the model's own ``get_image_features``
    (model_spec/image_tokens.py), the formula of :func:`llava_image_tokens` for LLaVA itself."""
    vision = vision_of(cfg)
    native = _native_size(vision) or processor_size(cfg)
    requested = opts.image_size or defaults.get("image_size") or native
    h, w = processed_size(cfg, opts, *image_hw(requested), smart_resize)  # Emu3's smart resize (vq_tokens.py); else as given
    if (h, w) != native and not is_anyres(cfg) and not processor_size(cfg):
        size = f"{native[0]}" if native[0] == native[1] else f"{native[0]}x{native[1]}"
        raise MemgraphError(
            f"this {cfg.model_type} model's vision tower takes {native[0]}x{native[1]} images (its processor "
            f"resizes to that); got --image-size {h}x{w}: pass --image-size {size}"
        )
    channels = getattr(vision, "num_channels", None) or getattr(vision, "in_channels", None) or 3
    b, n, seq = opts.batch_size, _images(opts, defaults), _seq(opts, defaults)
    probe = image_tokens_per_image(cfg, channels, h, w)
    per_image = probe.tokens
    ids, gen, image_mask = image_runs(cfg, b, seq, n, per_image, _token(cfg, "image_token_id", "image_token_index"),
                                      bos_fallback=1)
    labels = ids.masked_fill(image_mask, IGNORE_INDEX)
    if probe.tiles:  # any resolution: each image as its tiles of the tower's size (anyres.py)
        pixels = (b * n, probe.tiles, channels, *native)
    else:
        pixels = (b * n, channels, h, w) if probe.rank == 4 else (b, n, channels, h, w)
    inputs = [
        _known("input_ids", ids),
        ImageInput("pixel_values", pixels, dtype),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", labels),
    ]
    high = high_res_size(cfg)
    if high is not None and _takes(cfg, "high_res_pixel_values"):  # DeepSeek-VL-Hybrid: each image again, large
        inputs.insert(2, ImageInput("high_res_pixel_values", (b * n, channels, *high), dtype))
    if probe.tile_mask:  # every tile real (image_tokens.py _granite_docling)
        inputs.insert(2, _known("pixel_attention_mask", torch.ones(b, n, dtype=torch.bool)))
    if probe.image_sizes:  # the processor's (height, width) of each image after its resize
        inputs.append(_known("image_sizes", torch.tensor([[h, w]] * (b * n), dtype=LONG)))
    if _takes(cfg, "qformer_input_ids"):
        inputs += _qformer_text(cfg, b, seq - n * per_image, gen)
    if _takes(cfg, "token_type_ids"):
        # Gemma 3 / PaliGemma processors: token_type_ids 1 on the image tokens (models/gemma3/processing_gemma3.py
        # ``mm_token_type_ids[array_ids == self.image_token_id] = 1``); Gemma 3 requires them in training
        inputs.append(_known("token_type_ids", image_mask.to(LONG)))
    return inputs


def _prefix(cfg, opts, defaults, dtype) -> list[InputSpec]:
    """BLIP, GIT, Kosmos-2, image encoder-decoders: vision_prefix_inputs.py, one image of the tower's size."""
    native = _native_size(vision_of(cfg))
    h, w = image_hw(opts.image_size or defaults.get("image_size") or native)
    if (h, w) != native:
        raise MemgraphError(f"this {cfg.model_type} model's vision tower takes {native[0]}x{native[1]} images (its "
                            f"processor resizes to that); got --image-size {h}x{w}: pass --image-size {native[0]}")
    b, seq = opts.batch_size, _seq(opts, defaults)
    ids, _ = sample_text_ids(cfg, b, seq)
    return vision_prefix_inputs(cfg, model_class_for(cfg), b, seq, _images(opts, defaults), native, dtype, ids,
                                _known, ImageInput, vision_of(cfg))


def _document(cfg, opts, defaults, dtype) -> tuple[list[InputSpec], str]:
    """UDOP: document_inputs.py, one page of the config's image size, the target ``--target-len`` tokens."""
    size = image_hw(opts.image_size or defaults.get("image_size") or cfg.image_size)
    b, seq = opts.batch_size, _seq(opts, defaults)
    target = opts.target_len or defaults.get("target_len") or seq
    ids, gen = sample_text_ids(cfg, b, seq)
    target_ids = random_text_ids(b * target, cfg.vocab_size, special_token_ids(cfg), gen).view(b, target)
    return document_inputs(cfg, b, seq, target, _images(opts, defaults), size, dtype, ids, target_ids, _known,
                           ImageInput)


def _patch_rows(cfg, opts, defaults, dtype) -> list[InputSpec]:
    """Fuyu (patch_row_inputs.py): per image, ``rows`` x (``cols`` image tokens, a newline), ``<s>``, then text;
    ``pixel_values`` ``[B*N*rows*cols, p*p*C]``; labels ignore the image, its newlines and ``<s>``."""
    h, w = image_hw(opts.image_size or defaults.get("image_size") or cfg.image_size)
    b, n, seq = opts.batch_size, _images(opts, defaults), _seq(opts, defaults)
    rows, cols = fuyu_grid(cfg, h, w)
    per_image = fuyu_tokens(cfg, h, w)
    if seq < n * per_image + 1:
        raise _too_short(seq, n * per_image + 1, f"{n} image(s) of {rows} x {cols} patches")
    ids, _ = sample_text_ids(cfg, b, seq)
    image = torch.zeros(b, seq, dtype=torch.bool)
    prefix = torch.zeros(b, seq, dtype=torch.bool)
    bos = _token(cfg, "bos_token_id")  # the text config's (FuyuConfig names none of its own)
    pos = 0
    for _ in range(n):
        for r in range(rows):
            image[:, pos:pos + cols] = True  # then one newline token (ordinary text id here)
            pos += cols + 1
        ids[:, pos] = bos if isinstance(bos, int) else ids[:, pos]
        pos += 1
    prefix[:, :pos] = True
    ids[image] = cfg.image_token_id
    channels = getattr(cfg, "num_channels", None) or 3
    p = int(cfg.patch_size)
    return [
        _known("input_ids", ids),
        ImageInput("pixel_values", (b * n * rows * cols, p * p * channels), dtype),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", ids.masked_fill(prefix, IGNORE_INDEX)),
    ]


def _soft_tokens(cfg, opts, defaults, dtype) -> list[InputSpec]:
    """Gemma 4 (soft_token_patches.py): per image ``<boi> <image> * T <eoi>`` after BOS, then text;
    ``pixel_values`` ``[B*N, max_patches, p*p*C]``, ``image_position_ids``, ``mm_token_type_ids`` 1 on the
    image tokens."""
    size = opts.image_size or defaults.get("image_size")
    if size is None:
        raise MemgraphError(f"no default image size for this {cfg.model_type} model (its processor resizes any image "
                            "into its patch budget): pass --image-size N or HxW")
    h, w = image_hw(size)
    frames = getattr(opts, "video_frames", None) or 0
    b, seq = opts.batch_size, _seq(opts, defaults)
    n = opts.images if opts.images else (0 if frames else _images(opts, defaults))
    per_image = soft_tokens(cfg, h, w)
    # a video: each frame resized into the video processor's smaller budget, written as "mm:ss <boi> <video> * T
    # <eoi>" (processing_gemma4.py replace_video_token; one text token stands for the timestamp here)
    per_frame = soft_tokens(cfg, h, w, VIDEO_MAX_SOFT_TOKENS) if frames else 0
    need = 1 + n * (per_image + 2) + frames * (per_frame + 3)
    if seq < need:
        raise _too_short(seq, need, f"{n} image(s) of {per_image} soft tokens"
                         + (f" and {frames} frames of {per_frame}" if frames else ""))
    ids, _ = sample_text_ids(cfg, b, seq)
    text = cfg.get_text_config()
    bos = getattr(text, "bos_token_id", None)
    ids[:, 0] = bos if isinstance(bos, int) else ids[:, 0]
    image = torch.zeros(b, seq, dtype=torch.bool)
    special = torch.zeros(b, seq, dtype=torch.bool)
    boi, eoi = _token(cfg, "boi_token_id"), _token(cfg, "eoi_token_id")
    video = torch.zeros(b, seq, dtype=torch.bool)
    pos = 1
    for tokens, mask, gap in [(per_image, image, 0)] * n + [(per_frame, video, 1)] * frames:
        pos += gap  # a frame's timestamp
        ids[:, pos] = boi if boi is not None else ids[:, pos]
        mask[:, pos + 1:pos + 1 + tokens] = True
        ids[:, pos + 1 + tokens] = eoi if eoi is not None else ids[:, pos + 1 + tokens]
        special[:, pos - gap:pos + tokens + 2] = True
        pos += tokens + 2
    ids[image] = _token(cfg, "image_token_id")
    if frames:
        ids[video] = _token(cfg, "video_token_id")
    inputs = [_known("input_ids", ids)]
    if n:
        pixels, positions = soft_patch_inputs(cfg, b * n, h, w, dtype)
        inputs += [ImageInput("pixel_values", pixels, dtype), _known("image_position_ids", positions)]
    if frames:  # the frames of every video along one axis (modeling_gemma4.py get_video_features)
        pixels, positions = soft_patch_inputs(cfg, b * frames, h, w, dtype, VIDEO_MAX_SOFT_TOKENS)
        inputs += [ImageInput("pixel_values_videos", pixels, dtype), _known("video_position_ids", positions),
                   _known("num_frames_per_video", torch.full((b,), frames, dtype=LONG))]
    return inputs + [
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("mm_token_type_ids", image.to(LONG) + 2 * video.to(LONG)),  # 1 image, 2 video
        _known("labels", ids.masked_fill(special, IGNORE_INDEX)),
    ]


def _qformer_text(cfg, b: int, text_tokens: int, gen) -> list[InputSpec]:
    """InstructBLIP's instruction for its Q-Former: the processor tokenizes the prompt a second time with the
    Q-Former's tokenizer (processing_instructblip.py ``qformer_input_ids`` / ``qformer_attention_mask``); here the
    sample's text tokens again, in the Q-Former's vocabulary, at most its ``max_position_embeddings``."""
    q = cfg.qformer_config
    n = max(1, min(text_tokens, q.max_position_embeddings))
    ids = torch.randint(3, max(q.vocab_size, 4), (b, n), generator=gen, dtype=LONG)
    return [_known("qformer_input_ids", ids), _known("qformer_attention_mask", torch.ones(b, n, dtype=LONG))]


# processing_instructblipvideo.py inserts num_query_tokens * 4 video tokens ("video has frames=4 always",
# modeling_instructblipvideo.py): the frames a video must have
QUERY_VIDEO_FRAMES = 4


def _query_video(cfg, opts, defaults, dtype) -> list[InputSpec]:
    """InstructBLIP-Video: ``pixel_values`` ``[B, 4, C, s, s]``; each frame through the vision tower and the
    Q-Former, ``num_query_tokens`` text embeddings per frame at the ``<video>`` tokens; the instruction again
    for the Q-Former (:func:`_qformer_text`)."""
    frames = getattr(opts, "video_frames", None) or QUERY_VIDEO_FRAMES
    if frames != QUERY_VIDEO_FRAMES:
        raise MemgraphError(f"--video-frames {frames}: InstructBLIP-Video's processor inserts the tokens of "
                            f"{QUERY_VIDEO_FRAMES} frames per video: pass --video-frames {QUERY_VIDEO_FRAMES}")
    if opts.images:
        raise MemgraphError("--images: InstructBLIP-Video takes one video per sample, no images: drop --images")
    v = cfg.vision_config
    s = _native_size(v)
    if opts.image_size is not None and image_hw(opts.image_size) != s:
        raise MemgraphError(f"this model's processor resizes every frame to {s[0]}x{s[1]}: pass --image-size {s[0]}")
    b, seq = opts.batch_size, _seq(opts, defaults)
    tokens = cfg.num_query_tokens * frames
    if seq < tokens + 2:
        raise MemgraphError(f"--seq-len {seq} cannot hold a video of {tokens} query tokens with text: pass "
                            f"--seq-len {tokens + 2} or more")
    ids, gen = sample_text_ids(cfg, b, seq)
    video = torch.zeros(b, seq, dtype=torch.bool)
    video[:, :tokens] = True  # the processor puts the video tokens first, then BOS and the text
    ids[video] = _token(cfg, "video_token_index")
    channels = getattr(v, "num_channels", None) or 3
    return [
        _known("input_ids", ids),
        ImageInput("pixel_values", (b, frames, channels, *s), dtype),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", ids.masked_fill(video, IGNORE_INDEX)),
        *_qformer_text(cfg, b, seq - tokens, gen),
    ]


def _cross_attention(cfg, opts, defaults, dtype):
    """Mllama's layout (cross_attention_inputs.py): ``--image-size`` the image's own size, default one tile."""
    size = opts.image_size or defaults.get("image_size") or int(cfg.vision_config.image_size)
    h, w = image_hw(size)
    b, n, seq = opts.batch_size, _images(opts, defaults), _seq(opts, defaults)
    text_ids, _ = sample_text_ids(cfg, b, seq)
    known, pixels, note = cross_attention_batch(cfg, b, n, seq, h, w, text_ids)
    order = ("input_ids", "aspect_ratio_ids", "aspect_ratio_mask", "cross_attention_mask", "attention_mask", "labels")
    inputs = [_known(name, known[name]) for name in order]
    return [inputs[0], ImageInput("pixel_values", pixels, dtype), *inputs[1:]], note


def _takes(cfg, name: str) -> bool:
    """Whether the config's image-text-to-text class names ``name`` among its forward() parameters."""
    import inspect

    cls = model_class_for(cfg)
    return cls is not None and name in inspect.signature(cls.forward).parameters


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


def qwen2_vl_grid(cfg, size, min_pixels: int = QWEN2VL_MIN_PIXELS,
                  max_pixels: int = QWEN2VL_MAX_PIXELS) -> tuple[int, int, int]:
    """(grid_h, grid_w, visual tokens) of one image of ``size`` (N or (H, W)) after the processor's resize."""
    v = cfg.vision_config
    patch, merge = _one(v.patch_size), merge_of(v)
    h, w = smart_resize(*image_hw(size), factor=patch * merge, min_pixels=min_pixels, max_pixels=max_pixels)
    gh, gw = h // patch, w // patch
    return gh, gw, grid_tokens(cfg, gh, gw, merge)


def _one(v) -> int:
    return int(v[0]) if isinstance(v, (list, tuple)) else int(v)


# transformers 5.23 Qwen2VLVideoProcessor.size (video_processing_qwen2_vl.py): each frame's pixel budget
QWEN2VL_VIDEO_MIN_PIXELS = 128 * 28 * 28
QWEN2VL_VIDEO_MAX_PIXELS = 28 * 28 * 768


def qwen2_vl_video_grid(cfg, size, frames: int) -> tuple[int, int, int, int]:
    """(grid_t, grid_h, grid_w, video tokens) of one video of ``frames`` frames of ``size``: each frame resized by
    ``smart_resize`` within the video processor's budget, frames padded to a multiple of the temporal patch and
    grouped by it (video_processing_qwen2_vl.py: ``grid_t = (frames + -frames % temporal) // temporal``)."""
    v = cfg.vision_config
    patch, merge, temporal = _one(v.patch_size), merge_of(v), temporal_of(v)
    h, w = smart_resize(*image_hw(size), factor=patch * merge, min_pixels=QWEN2VL_VIDEO_MIN_PIXELS,
                        max_pixels=QWEN2VL_VIDEO_MAX_PIXELS)
    # ERNIE-4.5-VL: frames are not grouped into patches (padded to a multiple of 2,
    # video_processing_ernie4_5_vl_moe.py); its resampler merges temporal_merge_size frames into one token
    # (processing_ernie4_5_vl_moe.py ``num_patches // merge_size**2 // temporal_merge_size``)
    merge_t = getattr(v, "temporal_merge_size", None) if temporal == 1 else None
    if isinstance(merge_t, int) and merge_t > 1:
        gt, gh, gw = frames + -frames % merge_t, h // patch, w // patch
        return gt, gh, gw, gt * gh * gw // (merge * merge) // merge_t
    gt, gh, gw = (frames + -frames % temporal) // temporal, h // patch, w // patch
    return gt, gh, gw, gt * gh * gw // (merge * merge)


def _qwen2_vl(cfg, opts, defaults, dtype, audio=None) -> list[InputSpec]:
    v = cfg.vision_config
    size = opts.image_size or defaults.get("image_size")
    if size is None:
        raise MemgraphError("no default image size for this model: pass --image-size N or HxW")
    frames = getattr(opts, "video_frames", None)
    cells = is_cell_grid(cfg)
    if cells:  # cell_grid.py: padded to whole cells, no resize, no pixel budget, no video processor
        refuse_pixel_flags(opts, cfg.model_type)
        if frames:
            raise MemgraphError(f"--video-frames: {cfg.model_type}'s processor takes images only: drop --video-frames")
        gh, gw, per_image = cell_grid(cfg, *image_hw(size))
    else:
        budget = pixel_budget(opts, defaults)
        gh, gw, per_image = qwen2_vl_grid(cfg, size, budget.min_pixels, budget.max_pixels)
    b, seq = opts.batch_size, _seq(opts, defaults)
    n = opts.images if opts.images else (0 if frames else _images(opts, defaults))
    video = qwen2_vl_video_grid(cfg, size, frames) if frames else None
    per_video = video[3] if video else 0
    per_audio = audio.tokens if audio else 0
    # (tokens, mm_token_type, text tokens beside the group): images, then the video (GLM-4.1V, Qwen3-VL: one group
    # per temporal patch, a timestamp beside each, video_inputs.py frame_groups)
    groups = [(per_image, 1, 0)] * n
    if video:
        groups += [(per_video // video[0], 2, 1)] * video[0] if frame_groups(cfg) else [(per_video, 2, 0)]
    span = video_span(cfg) if video else None  # GLM-5 Next: <|begin_of_video|> frames <|end_of_video|>
    need = 1 + sum(t + 2 + gap for t, _, gap in groups) + (per_audio + 2 if audio else 0) + (2 if span else 0)
    if seq < need:
        what = (f"{n} image(s) of {per_image} visual tokens" + (f" and a video of {per_video}" if video else "")
                + (f" and {per_audio} audio tokens" if audio else ""))
        raise _too_short(seq, need, what)
    ids, _ = sample_text_ids(cfg, b, seq)
    kind = torch.zeros(b, seq, dtype=LONG)  # mm_token_type_ids: 1 image, 2 video (processing_qwen2_vl.py)
    vision_tokens = torch.zeros(b, seq, dtype=torch.bool)
    start = _token(cfg, "vision_start_token_id", "image_start_token_id")
    end = _token(cfg, "vision_end_token_id", "image_end_token_id")
    pos = 1
    for i, (tokens, code, gap) in enumerate(groups):
        if span and i == n:  # the video's first frame
            ids[:, pos] = span[0]
            vision_tokens[:, pos] = True
            pos += 1
        ids[:, pos] = start if start is not None else ids[:, pos]
        kind[:, pos + 1:pos + 1 + tokens] = code
        ids[:, pos + 1 + tokens] = end if end is not None else ids[:, pos + 1 + tokens]
        vision_tokens[:, pos:pos + tokens + 2 + gap] = True
        pos += tokens + 2 + gap
    if span:
        ids[:, pos] = span[1]
        vision_tokens[:, pos] = True
        pos += 1
    if n:
        ids[kind == 1] = _token(cfg, "image_token_id", "image_token_index")
    if video:
        video_id = "image_token_id" if frames_as_images(cfg) else "video_token_id"
        ids[kind == 2] = _token(cfg, video_id)
    if audio:  # [audio_start] [audio] * A [audio_end] after the vision inputs (processing_qwen2_5_omni.py)
        ids[:, pos] = _token(cfg, "audio_start_token_id")
        ids[:, pos + 1:pos + 1 + per_audio] = _token(cfg, "audio_token_id", "audio_token_index")
        end = _token(cfg, "audio_end_token_id")  # Qwen3-Omni's config names none (the tokenizer's <|audio_end|>)
        ids[:, pos + 1 + per_audio] = end if end is not None else ids[:, pos + 1 + per_audio]
        vision_tokens[:, pos:pos + per_audio + 2] = True  # no loss on them either
    labels = ids.masked_fill(vision_tokens, IGNORE_INDEX)
    channels = getattr(v, "in_channels", None) or getattr(v, "in_chans", 3)
    qwen = hasattr(v, "spatial_merge_size") and hasattr(v, "temporal_patch_size")
    if cells:
        row = cell_shape(cfg)
    elif qwen:
        row = (channels * temporal_of(v) * _one(v.patch_size) ** 2,)
    else:  # patch_grid.py: the row its patch embedding reads
        row = patch_row_shape(cfg, model_class_for(cfg))
    inputs = [
        _known("input_ids", ids),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
    ]
    if qwen or _takes(cfg, "mm_token_type_ids"):
        inputs.append(_known("mm_token_type_ids", kind))
    if n:
        inputs += [InputSpec("pixel_values", (b * n * gh * gw, *row), dtype),
                   _known("image_grid_thw", torch.tensor([[1, gh, gw]] * (b * n), dtype=LONG))]
    if video:
        gt, vh, vw, _ = video
        inputs += [InputSpec("pixel_values_videos", (b * gt * vh * vw, *row), dtype),
                   _known("video_grid_thw", torch.tensor([[gt, vh, vw]] * b, dtype=LONG))]
        if _takes(cfg, "video_second_per_grid"):  # the omni thinkers' rope reads it (video_inputs.py)
            inputs.append(_known("video_second_per_grid", torch.tensor([omni_second_per_grid(cfg)] * b)))
    if audio:
        feats = audio.features
        inputs.append(InputSpec("input_features", (b * feats.shape[0], *feats.shape[1:]), dtype))
        inputs.append(_known(audio.mask_name, audio.mask.to(LONG).repeat(b, 1)))
    return inputs + [_known("labels", labels)]


__all__ = ["KnownInput", "ImageInput", "NO_ZERO", "NoImageTextLayout", "image_text_to_text", "layout_of", "image_hw", "smart_resize", "qwen2_vl_grid", "qwen2_vl_video_grid", "llava_image_tokens"]
