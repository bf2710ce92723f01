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
import inspect
import json
from dataclasses import dataclass

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.anyres import is_anyres, tiles_per_image
from memgraph.model_spec.auto_classes import auto_class
from memgraph.model_spec.vq_tokens import VQ_PROCESSOR_SIZES, vq_tokens_per_image


@dataclass(frozen=True)
class ImageProbe:
    """What one image takes: its text tokens, the rank of ``pixel_values`` the model reads (4: ``[images, C, H,
    W]``; 5: ``[samples, images, C, H, W]``, Idefics 2/3 and SmolVLM) and whether it needs ``image_sizes``."""

    tokens: int
    rank: int = 4
    image_sizes: bool = False
    tiles: int = 0  # any-resolution models (anyres.py): pixel_values [images, tiles, C, s, s]; 0: not tiled
    tile_mask: bool = False  # Granite Docling: a ``pixel_attention_mask`` [samples, tiles] of the real tiles


def image_tokens_per_image(cfg, channels: int, height: int, width: int) -> ImageProbe:
    """Text tokens one ``channels x height x width`` image takes (the feature rows ``get_image_features`` gives)."""
    try:
        key = cfg.to_json_string(use_diff=False)
    except Exception:  # a config that does not serialise: probe without the cache
        return _probe(cfg, channels, height, width)
    return _cached(key, type(cfg), channels, height, width)


@functools.lru_cache(maxsize=32)
def _cached(key: str, config_class, channels: int, height: int, width: int) -> ImageProbe:
    return _probe(config_class.from_dict(json.loads(key)), channels, height, width)


def model_class_for(cfg):
    """The image-text-to-text class transformers' auto mapping names for the config's model type, else None."""
    from transformers.models.auto import modeling_auto

    return auto_class(cfg, modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def _probe(cfg, channels: int, height: int, width: int) -> ImageProbe:
    """Ask ``get_image_features`` on meta: first ``[1, C, H, W]``, then ``[1, 1, C, H, W]`` for models that take
    the images of a sample together; ``image_sizes`` ``[[H, W]]`` where it is a required argument (Mistral 3,
    LightOnOCR: the Pixtral tower crops each image to its size; a CPU tensor, as its values are read)."""
    cls = model_class_for(cfg)
    what = f"{getattr(cfg, 'model_type', '?')}'s image tokens per {height}x{width} image"
    if cls is None:
        raise MemgraphError(f"cannot count {what}: no image-text class for it; describe the inputs with --input")
    try:
        with torch.device("meta"):
            model = cls(copy.deepcopy(cfg))
    except Exception as e:
        raise MemgraphError(f"cannot count {what}: building it on meta failed ({type(e).__name__}: {str(e)[:160]})") from e
    if not hasattr(model, "get_image_features"):
        # DeepSeek-VL, DeepSeek-VL-Hybrid, Janus: the head class leaves get_image_features to its base model
        # (``model.model``, e.g. modeling_janus.py JanusModel.get_image_features)
        model = getattr(model, "model", None)
    if model is None or not hasattr(model, "get_image_features"):
        raise MemgraphError(f"cannot count {what}: the model has no get_image_features; describe the inputs with --input")
    hidden = cfg.get_text_config().hidden_size
    param = inspect.signature(model.get_image_features).parameters.get("image_sizes")
    sizes = param is not None and param.default is inspect.Parameter.empty
    extra = {"image_sizes": torch.tensor([[height, width]])} if sizes else {}
    high = high_res_size(cfg)
    if high is not None and "high_res_pixel_values" in inspect.signature(model.get_image_features).parameters:
        with torch.device("meta"):  # DeepSeek-VL-Hybrid's second, high-resolution tower (its own input)
            extra["high_res_pixel_values"] = torch.empty(1, channels, *high)
    if cfg.model_type in FAMILY_RULES:
        return FAMILY_RULES[cfg.model_type](cfg, height, width)
    if isinstance(getattr(cfg, "num_query_tokens", None), int) and hasattr(model, "query_tokens"):
        return _query_tokens(cfg)
    if is_anyres(cfg):
        return _probe_tiles(cfg, cls, model, channels, height, width, hidden, what)
    errors = []
    for rank in (4, 5):
        shape = (1,) * (rank - 3) + (channels, height, width)
        try:
            with torch.device("meta"):
                out = model.get_image_features(pixel_values=torch.empty(shape), **extra)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {str(e)[:120]}")
            continue
        return ImageProbe(feature_rows(out, hidden, what), rank, sizes)
    raise MemgraphError(f"cannot count {what}: get_image_features on one meta image failed ({' / '.join(errors)}); "
                        "describe the inputs with --input")


def _probe_tiles(cfg, cls, model, channels, height, width, hidden, what) -> ImageProbe:
    """An any-resolution model (anyres.py): one ``height x width`` image as its processor's tiles of the vision
    tower's size, ``[1, tiles, C, s, s]``, with ``image_sizes`` ``[[height, width]]`` (read for its values: a CPU
    tensor)."""
    tiles = tiles_per_image(cfg, cls, height, width)
    s = cfg.vision_config.image_size
    try:
        with torch.device("meta"):
            pixels = torch.empty(1, tiles, channels, s, s)
        out = model.get_image_features(pixel_values=pixels, image_sizes=torch.tensor([[height, width]]))
    except Exception as e:
        raise MemgraphError(f"cannot count {what}: get_image_features on {tiles} meta tiles failed "
                            f"({type(e).__name__}: {str(e)[:160]}); describe the inputs with --input") from e
    return ImageProbe(feature_rows(out, hidden, what), rank=5, image_sizes=True, tiles=tiles)


def _query_tokens(cfg) -> ImageProbe:
    """Q-Former models (BLIP-2, InstructBLIP): a learned ``query_tokens`` parameter ``[1, num_query_tokens, H]``
    attends to the image, and ``language_projection`` maps each query output to one text embedding
    (modeling_blip_2.py ``get_image_features``; the processor inserts ``num_query_tokens`` image tokens,
    processing_blip_2.py). Read from the structure: the Q-Former's own attention mask is checked by value
    (``padding_mask.all()``), which a meta probe cannot answer."""
    return ImageProbe(int(cfg.num_query_tokens))


def _idefics3(cfg, height=None, width=None) -> ImageProbe:
    """processing_idefics3.py / processing_smolvlm.py: ``image_seq_len = int(((image_size // patch_size) ** 2) /
    (scale_factor**2))`` (the connector's pixel shuffle); images of a sample as ``[samples, images, C, H, W]``."""
    v = cfg.vision_config
    return ImageProbe(int((v.image_size // v.patch_size) ** 2 / cfg.scale_factor ** 2), rank=5)


def _idefics2(cfg, height=None, width=None) -> ImageProbe:
    """modeling_idefics2.py Idefics2PerceiverResampler: ``resampler_n_latents`` latents per image (the processor's
    ``image_seq_len``, processing_idefics2.py); images as ``[samples, images, C, H, W]``."""
    return ImageProbe(int(cfg.perceiver_config.resampler_n_latents), rank=5)


def _mistral3(cfg, height: int, width: int) -> ImageProbe:
    """Mistral 3 (Pixtral tower, patch merger): its get_image_features splits the features per image by
    ``(image_sizes // (patch_size * spatial_merge_size)).prod(-1).tolist()`` (modeling_mistral3.py), which reads
    ``image_sizes`` back on the model's device (no values on meta): the same count from the sizes here."""
    ratio = cfg.vision_config.patch_size * cfg.spatial_merge_size
    return ImageProbe((height // ratio) * (width // ratio), rank=4, image_sizes=True)


def _granite_docling(cfg, height=None, width=None) -> ImageProbe:
    """modeling_granite_docling.py ``image_seq_len = (image_size // patch_size) ** 2 / scale_factor ** 2`` tokens
    per tile (the vision config's scale factor), tiles as ``[samples, tiles, C, H, W]`` beside a required
    ``pixel_attention_mask`` ``[samples, tiles]`` whose values pick the real tiles (read back: no meta probe).
    One image at the tower's size is one tile (processing_granite_docling.py: no thumbnail for a single tile)."""
    v = cfg.vision_config
    return ImageProbe(int((v.image_size // v.patch_size) ** 2 / v.scale_factor ** 2), rank=5, tile_mask=True)


def _aria(cfg, height: int, width: int) -> ImageProbe:
    """modeling_aria.py AriaProjector: ``patch_to_query_dict[num_patches]`` queries per image (its processor
    inserts as many image tokens, processing_aria.py); an image whose patch count the table lacks is refused
    there, so here."""
    v, table = cfg.vision_config, cfg.projector_patch_to_query_dict
    patches = (height // v.patch_size) * (width // v.patch_size)
    if patches not in table:
        sizes = ", ".join(str(int(p ** 0.5) * v.patch_size) for p in sorted(table))
        raise MemgraphError(f"aria's projector takes images of {sizes} px (its patch_to_query_dict); got "
                            f"{height}x{width} ({patches} patches): pass --image-size with one of those")
    return ImageProbe(int(table[patches]))


# Families whose get_image_features reads pixel values back (``real_images_inds``, the per-image padding test):
# the probe runs outside the trace (model_spec sits below trace/shadow_values.py, which answers that test in the
# trace from ImageInput's declared no-zero fact), so their count is the processor's own rule, from the file
# named in each rule.
# Step3p7's vision tower (modeling_step3p7.py Step3p7VisionModel, transformers 5.23): a ViT of ``patch_size`` patches,
# then two 3x3 convolutions of stride 2 and padding 1 (``downsampler1`` / ``downsampler2``), each ceil(side / 2)
STEP3P7_DOWNSAMPLERS = 2


def _step3p7(cfg, height=None, width=None) -> ImageProbe:
    """processing_step3p7.py: the global view's ``(size // (vision_patch_size * 4)) ** 2`` tokens (169 for the released
    728 px, 14 px patches); the tower's own arithmetic here (its RoPE grid is built with ``tolist()``, which a meta
    probe cannot read). An image no larger than the global view (and not elongated) gets no local crops."""
    v = cfg.vision_config
    side_h, side_w = height // v.patch_size, width // v.patch_size
    for _ in range(STEP3P7_DOWNSAMPLERS):
        side_h, side_w = -(-side_h // 2), -(-side_w // 2)
    return ImageProbe(side_h * side_w)


FAMILY_RULES = {"idefics3": _idefics3, "smolvlm": _idefics3, "idefics2": _idefics2,
                # reads image_sizes back on the model's device (Mistral Large 4: the same split,
                # modeling_mistral_large4.py get_image_features)
                "mistral3": _mistral3, "mistral_large4": _mistral3, "granite_docling": _granite_docling,
                # reads the vision tower's patch mask back (Tensor.item() on meta); its count is a table lookup
                "aria": _aria, "step3p7": _step3p7,
                # its codes are picked by argmin and read back on the CPU to map them to token ids (vq_tokens.py)
                "chameleon": lambda cfg, height, width: ImageProbe(vq_tokens_per_image(cfg, height, width)),
                "emu3": lambda cfg, height, width: ImageProbe(vq_tokens_per_image(cfg, height, width), image_sizes=True)}


# Models whose vision config names no image size: the size their released processor resizes every image to, and
# the processor's setting that --image-size stands for (its tokens still come from get_image_features)
# - Florence-2: 768 x 768 (the released preprocessor_config.json, whose image_seq_length 577 = (768 / 32)^2 + 1 is
#   what get_image_features returns for it)
# - Chameleon: 512 x 512 (vq_tokens.py)
PROCESSOR_SIZES = {"florence2": (768, 768), **VQ_PROCESSOR_SIZES}


def processor_size(cfg) -> tuple[int, int] | None:
    return PROCESSOR_SIZES.get(getattr(cfg, "model_type", None))


def high_res_size(cfg) -> tuple[int, int] | None:
    """The (H, W) of DeepSeek-VL-Hybrid's ``high_res_pixel_values``: its processor resizes each image a second time
    to the high-resolution (SAM) tower's ``image_size`` (image_processing_deepseek_vl_hybrid.py ``high_res_size``,
    1024 = the released ``high_res_vision_config.image_size``); None for other models."""
    size = getattr(getattr(cfg, "high_res_vision_config", None), "image_size", None)
    return (int(size), int(size)) if isinstance(size, int) else None


def feature_rows(out, hidden: int, what: str) -> int:
    features = getattr(out, "pooler_output", None)
    deepstack = getattr(out, "deepstack_features", None)
    if features is None and deepstack:
        # Granite 4 Vision: (LLM layer, features) per projector, each the image tokens' rows (the first one checked
        # against the image tokens, modeling_granite4_vision.py ``get_placeholder_mask``)
        features = deepstack[0][1]
    if features is None:
        features = out if isinstance(out, (torch.Tensor, list, tuple)) else getattr(out, "last_hidden_state", None)
    tensors = [features] if isinstance(features, torch.Tensor) else list(features or [])
    numel = sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))
    if numel == 0 or numel % hidden:
        raise MemgraphError(f"cannot count {what}: its image features ({numel} values) are not rows of the text "
                            f"hidden size {hidden}; describe the inputs with --input")
    return numel // hidden


__all__ = ["PROCESSOR_SIZES", "processor_size", "ImageProbe", "feature_rows", "high_res_size", "image_tokens_per_image", "model_class_for"]
