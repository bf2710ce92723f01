"""``--video-frames`` for LLaVA-style video models: one video per sample, its frames at the vision tower's size.

LLaVA-NeXT-Video, LLaVA-OneVision and Video-LLaVA take a video as ``pixel_values_videos`` ``[videos, frames, C,
H, W]``, each frame resized (and cropped) by the video processor to the tower's ``image_size`` like an image, and
scatter the video features at the ``<video>`` tokens, checking the count as for images (``get_placeholder_mask``:
``n_video_tokens * hidden == video_features.numel()``). The tokens a video takes are what the model's own
``get_video_features`` returns for it, asked on ``meta`` (image_tokens.py does the same for images): Video-LLaVA's
patches (+ CLS) per frame, LLaVA-NeXT-Video's 2x2-pooled patches per frame (its ``vision_resampler``),
LLaVA-OneVision's bilinearly halved patches per frame plus one ``image_newline`` per video
(modeling_llava_onevision.py ``get_video_features``), each matching its processor's count
(processing_video_llava.py ``num_image_tokens * num_frames``; processing_llava_onevision.py
``num_frames * pooled_height_width ** 2 + 1``). The processor puts the video first: BOS, the video tokens, then
the text; no loss on the video tokens.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import math

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.image_tokens import feature_rows, model_class_for
from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec

LONG = torch.int64


def video_token_id(cfg) -> int | None:
    for c in (cfg, cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg):
        for n in ("video_token_id", "video_token_index"):
            v = getattr(c, n, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return None


def is_video_class_name(class_name: str) -> bool:
    """A transformers class that takes video: its forward reads ``pixel_values_videos``, or it is a video model
    whose ``pixel_values`` are the frames (InstructBLIP-Video). transformers 5.23 has no video-text-to-text auto
    mapping: the coverage tool's video row is the image-text-to-text classes this names."""
    import transformers

    cls = getattr(transformers, class_name, None)
    if cls is None:
        return "Video" in class_name
    return "Video" in class_name or "pixel_values_videos" in inspect.signature(cls.forward).parameters


# GLM-4.1V and the models built on it write a video as its frames' image tokens, one group per temporal patch,
# each ``<|begin_of_image|>`` tokens ``<|end_of_image|>`` and the frame's timestamp (processing_glm4v.py
# ``replace_frame_token_id``), and find them by the image token (modeling_glm4v.py ``get_placeholder_mask``:
# "special_video_mask is special_image_mask"; the same in glm4v_moe, glm46v and glm_ocr, transformers 5.23)
FRAMES_AS_IMAGES = frozenset({"glm4v", "glm4v_moe", "glm46v", "glmga", "glm_ocr", "glm5_next"})
# GLM-5 Next tells a video's frames from images by the span around them: image tokens between
# ``<|begin_of_video|>`` and ``<|end_of_video|>`` (modeling_glm5_next.py ``get_placeholder_mask``: "img token == vid
# token so we differentiate by start/end spans"; the chat template writes them around ``<|video|>``, which
# processing_glm5_next.py ``replace_video_token`` expands into the frames, transformers 5.23)
VIDEO_SPANS = frozenset({"glm5_next"})
# Qwen3-VL and the models built on it write each temporal patch of a video as its own group too, ``<t seconds>``
# ``<|vision_start|>`` video tokens ``<|vision_end|>`` (processing_qwen3_vl.py ``replace_video_token``), and their
# rope index takes one grid per group (modeling_qwen3_vl.py ``get_rope_index``: ``video_grid_thw`` repeated per
# frame, ``t`` set to 1; the same in qwen3_vl_moe, qwen3_5, qwen3_5_moe, cosmos3_edge, cosmos3_omni and
# cohere_compass (processing_cohere_compass.py ``replace_video_token``); qwen4_exp takes Qwen3VLProcessor
# (auto/processing_auto.py) and the same rope index (modeling_qwen4_exp.py ``get_rope_index``), transformers 5.23)
FRAME_GROUPS = FRAMES_AS_IMAGES | {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "cosmos3_edge", "cosmos3_omni",
                                   "cohere_compass", "qwen4_exp"}


def video_span(cfg) -> tuple[int, int] | None:
    """(video start id, video end id) written around a video's frames where the model reads that span, else None."""
    if getattr(cfg, "model_type", None) not in VIDEO_SPANS:
        return None
    return cfg.video_start_token_id, cfg.video_end_token_id


def frames_as_images(cfg) -> bool:
    return getattr(cfg, "model_type", None) in FRAMES_AS_IMAGES


def frame_groups(cfg) -> bool:
    """One token group per temporal patch of a video, a timestamp's text beside each."""
    return getattr(cfg, "model_type", None) in FRAME_GROUPS


# processing_qwen2_5_omni.py (transformers 5.23): "default fps not saved in official ckpt, hardcode" 2.0; each
# video's ``video_second_per_grid`` is ``temporal_patch_size / fps``, read by the thinker's rope index
OMNI_VIDEO_FPS = 2.0


def omni_second_per_grid(cfg) -> float:
    from memgraph.model_spec.patch_grid import temporal_of

    return temporal_of(cfg.vision_config) / OMNI_VIDEO_FPS


def takes_video(cfg) -> bool:
    """A fixed-size (LLaVA-style) model whose forward takes ``pixel_values_videos`` and whose config names a video
    token."""
    cls = model_class_for(cfg)
    if cls is None or video_token_id(cfg) is None:
        return False
    return "pixel_values_videos" in inspect.signature(cls.forward).parameters


def video_tokens(cfg, frames: int, channels: int, height: int, width: int) -> int:
    """Text tokens one video of ``frames`` frames of ``channels x height x width`` takes: the feature rows of the
    model's ``get_video_features`` on one meta video."""
    try:
        key = cfg.to_json_string(use_diff=False)
    except Exception:
        return _probe(cfg, frames, channels, height, width)
    return _cached(key, type(cfg), frames, channels, height, width)


@functools.lru_cache(maxsize=32)
def _cached(key: str, config_class, frames: int, channels: int, height: int, width: int) -> int:
    return _probe(config_class.from_dict(json.loads(key)), frames, channels, height, width)


def _onevision(cfg, frames: int, height: int, width: int) -> int:
    """processing_llava_onevision.py ``replace_video_token`` (5.6 and 5.23 alike): ``num_frames *
    ceil(patches / 2) ** 2 + 1`` (the newline); its model appends the newline in ``forward`` in 5.6 and in
    ``get_video_features`` in 5.23, so the probe would miss it on the lower end."""
    v = cfg.vision_config
    pooled = math.ceil(height // v.patch_size / 2) * math.ceil(width // v.patch_size / 2)
    return frames * pooled + 1


VIDEO_RULES = {"llava_onevision": _onevision}


def _probe(cfg, frames: int, channels: int, height: int, width: int) -> int:
    if cfg.model_type in VIDEO_RULES:
        return VIDEO_RULES[cfg.model_type](cfg, frames, height, width)
    what = f"{getattr(cfg, 'model_type', '?')}'s video tokens for {frames} frames of {height}x{width}"
    try:
        with torch.device("meta"):
            model = model_class_for(cfg)(copy.deepcopy(cfg))
            if not hasattr(model, "get_video_features"):
                model = getattr(model, "model", None)
            # the first argument: ``pixel_values_videos`` in 5.23, ``pixel_values`` in 5.6
            out = model.get_video_features(torch.empty(1, frames, channels, height, width))
    except Exception as e:
        raise MemgraphError(f"cannot count {what}: get_video_features on one meta video failed "
                            f"({type(e).__name__}: {str(e)[:160]}); describe the inputs with --input") from e
    return feature_rows(out, cfg.get_text_config().hidden_size, what)


def fixed_size_video(cfg, opts, defaults: dict, dtype: torch.dtype, kit) -> list[InputSpec]:
    """One video of ``--video-frames`` frames per sample at the tower's size: BOS, its video tokens, the text
    (``kit``: multimodal_inputs.py's shared pieces)."""
    ImageInput, _known, _native_size, _seq = kit.image_input, kit.known, kit.native_size, kit.seq
    _too_short, image_hw, sample_text_ids = kit.too_short, kit.image_hw, kit.sample_text_ids
    frames, vision = int(opts.video_frames), kit.vision_of(cfg)
    if getattr(opts, "images", None):
        raise MemgraphError(f"--images with --video-frames: memgraph lays out one video per sample without images "
                            f"for {cfg.model_type}: drop --images (or --video-frames)")
    native = _native_size(vision)
    h, w = image_hw(opts.image_size or defaults.get("image_size") or native)
    if (h, w) != native:
        size = f"{native[0]}" if native[0] == native[1] else f"{native[0]}x{native[1]}"
        raise MemgraphError(f"this {cfg.model_type} model's video processor resizes every frame to {native[0]}x"
                            f"{native[1]}; got --image-size {h}x{w}: pass --image-size {size}")
    channels = getattr(vision, "num_channels", None) or 3
    b, seq = opts.batch_size, _seq(opts, defaults)
    tokens = video_tokens(cfg, frames, channels, h, w)
    if seq < 1 + tokens + 1:
        raise _too_short(seq, tokens + 2, f"a video of {frames} frames ({tokens} tokens)")
    bos = getattr(cfg.get_text_config(), "bos_token_id", None)
    ids, _ = sample_text_ids(cfg, b, seq)
    ids[:, 0] = bos if isinstance(bos, int) else 1
    video = torch.zeros(b, seq, dtype=torch.bool)
    video[:, 1:1 + tokens] = True
    ids[video] = video_token_id(cfg)
    return [
        _known("input_ids", ids),
        ImageInput("pixel_values_videos", (b, frames, channels, h, w), dtype),
        _known("attention_mask", torch.ones(b, seq, dtype=LONG)),
        _known("labels", ids.masked_fill(video, IGNORE_INDEX)),
    ]


__all__ = ["FRAMES_AS_IMAGES", "fixed_size_video", "frames_as_images", "frame_groups", "FRAME_GROUPS", "omni_second_per_grid", "is_video_class_name", "takes_video", "video_token_id", "video_tokens"]
