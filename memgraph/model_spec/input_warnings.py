"""Inputs a model can be given but was not made for: one plain line each, for the report's warnings.

What a model *cannot* run is refused before tracing (a sequence past a learned position table,
facts/learned_positions.py; a LLaVA image of another size; a Whisper clip of another length). What it
runs but was not trained or preprocessed for is a warning, never an error:

- a sequence longer than a rotary model's ``max_position_embeddings``: rotary position embeddings
  (transformers 5.23 configs carry them as ``rope_parameters``) have no table to index past, so the step
  runs and its memory is what memgraph predicts; but the model was trained up to that length and quality
  past it depends on the rope scaling;
- an image size that the model's image processor would not produce: a fixed-size vision model's
  processor resizes every image to ``config.image_size`` (ViT-, CLIP-, ConvNeXt-style image processors'
  ``size``), and Qwen2-VL's ``smart_resize`` rounds each side to a multiple of 28 px
  (multimodal_inputs.py), so the tensors a real pipeline feeds differ from the size given.
"""

from __future__ import annotations

from memgraph.model_spec.multimodal_inputs import image_hw, smart_resize
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.pixel_budget import pixel_budget

SEQUENCE_TASKS = ("causal-lm", "masked-lm", "sequence-classification", "seq2seq-lm", "contrastive",
                  "image-text-to-text")
FIXED_IMAGE_TASKS = ("image-classification", "contrastive")


def input_warnings(spec, opts: TrainingOptions) -> list[str]:
    """The warnings for ``spec`` trained with ``opts`` (a model without a transformers config gets none)."""
    cfg = spec.config
    if cfg is None:
        return []
    out = list(getattr(spec, "warnings", []))  # sizing fields a user's config.json left out (config_defaults.py)
    if spec.task in SEQUENCE_TASKS:
        out += _rotary_positions(cfg, opts, spec.defaults)
    if spec.task in FIXED_IMAGE_TASKS and opts.image_size is not None:
        out += _fixed_image_size(cfg, opts.image_size)
    if spec.task == "image-text-to-text" and _is_qwen2_vl(cfg):
        out += _qwen2_vl_resize(cfg, opts.image_size or spec.defaults.get("image_size"), pixel_budget(opts, spec.defaults))
    return out


def _text(cfg):
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def _rotary_positions(cfg, opts: TrainingOptions, defaults: dict) -> list[str]:
    text = _text(cfg)
    seq = opts.seq_len or defaults.get("seq_len")
    limit = getattr(text, "max_position_embeddings", None)
    if getattr(text, "rope_parameters", None) is None or not isinstance(limit, int) or not seq or seq <= limit:
        return []
    return [f"sequence length {seq:,} is past this {text.model_type} model's max_position_embeddings {limit:,}: "
            "its rotary positions run (the memory is as predicted), but the model was trained up to "
            f"{limit:,} tokens and may extrapolate poorly past them"]


def _fixed_image_size(cfg, size) -> list[str]:
    vision = getattr(cfg, "vision_config", cfg)
    native = getattr(vision, "image_size", None)
    if isinstance(native, (list, tuple)) and len(native) == 2:
        native = tuple(native)
    elif isinstance(native, int):
        native = (native, native)
    else:
        return []
    h, w = image_hw(size)
    if (h, w) == native:
        return []
    return [f"image size {h}x{w} is not what this {cfg.model_type} model's processor makes: it resizes every "
            f"image to {native[0]}x{native[1]} (config image_size); analysed at {h}x{w} as given"]


def _is_qwen2_vl(cfg) -> bool:
    vision = getattr(cfg, "vision_config", None)
    return vision is not None and hasattr(vision, "spatial_merge_size") and hasattr(vision, "temporal_patch_size")


def _qwen2_vl_resize(cfg, size, budget) -> list[str]:
    if size is None:
        return []
    v = cfg.vision_config
    patch = int(v.patch_size[0]) if isinstance(v.patch_size, (list, tuple)) else int(v.patch_size)
    factor = patch * v.spatial_merge_size
    h, w = image_hw(size)
    rh, rw = smart_resize(h, w, factor=factor, min_pixels=budget.min_pixels, max_pixels=budget.max_pixels)
    if (rh, rw) == (h, w):
        return []
    return [f"image size {h}x{w} is not what {cfg.model_type}'s image processor makes: smart_resize turns it into "
            f"{rh}x{rw} (sides multiples of {factor} px, pixel count within {budget.describe()}), which is what "
            "was analysed"]
