"""How many tokens one fixed-size image takes in the text, asked of the model itself.

Every image-text model of transformers 5.23 that scatters image features into its text embeddings checks
the count the same way (``get_placeholder_mask``, e.g. models/llava/modeling_llava.py)::

    n_image_tokens * inputs_embeds.shape[-1] == image_features.numel()

so the number of image tokens a processor inserts per image is the number of feature rows the model's own
``get_image_features`` returns for one image, ``numel / text hidden size``, whatever the vision tower and
projector do in between: LLaVA's CLS dropped by the ``"default"`` strategy, Aya Vision's and InternVL's
pixel shuffle, PaliGemma's and Gemma 3's pooling to ``mm_tokens_per_image``. The probe builds the model on
``meta`` (no weights, no memory) and runs ``get_image_features`` on one ``[1, C, H, W]`` meta image: shapes
only, so it holds for any width, and a fixed-size vision tower has no value-dependent code.
"""

from __future__ import annotations

import copy
import functools
import json

import torch

from memgraph.errors import MemgraphError


def image_tokens_per_image(cfg, channels: int, height: int, width: int) -> int:
    """Text tokens one ``channels x height x width`` image takes (the feature rows ``get_image_features`` gives)."""
    try:
        key = cfg.to_json_string(use_diff=False)
    except Exception:  # a config that does not serialise: probe without the cache
        return _probe(cfg, channels, height, width)
    return _cached(key, type(cfg), channels, height, width)


@functools.lru_cache(maxsize=32)
def _cached(key: str, config_class, channels: int, height: int, width: int) -> int:
    return _probe(config_class.from_dict(json.loads(key)), channels, height, width)


def model_class_for(cfg):
    """The image-text-to-text class transformers' auto mapping names for the config's model type, else None."""
    import transformers
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(getattr(cfg, "model_type", None))
    if isinstance(name, (list, tuple)):
        name = name[0]
    return getattr(transformers, name, None) if name else None


def _probe(cfg, channels: int, height: int, width: int) -> int:
    cls = model_class_for(cfg)
    what = f"{getattr(cfg, 'model_type', '?')}'s image tokens per {height}x{width} image"
    if cls is None or not hasattr(cls, "get_image_features"):
        raise MemgraphError(f"cannot count {what}: the model has no get_image_features; describe the inputs with --input")
    hidden = cfg.get_text_config().hidden_size
    try:
        with torch.device("meta"):
            model = cls(copy.deepcopy(cfg))
            out = model.get_image_features(pixel_values=torch.empty(1, channels, height, width))
    except Exception as e:
        raise MemgraphError(f"cannot count {what}: get_image_features on one meta image failed "
                            f"({type(e).__name__}: {str(e)[:160]}); describe the inputs with --input") from e
    features = getattr(out, "pooler_output", None)
    if features is None:
        features = out if isinstance(out, (torch.Tensor, list, tuple)) else getattr(out, "last_hidden_state", None)
    tensors = [features] if isinstance(features, torch.Tensor) else list(features or [])
    numel = sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))
    if numel == 0 or numel % hidden:
        raise MemgraphError(f"cannot count {what}: its image features ({numel} values) are not rows of the text "
                            f"hidden size {hidden}; describe the inputs with --input")
    return numel // hidden


__all__ = ["image_tokens_per_image", "model_class_for"]
