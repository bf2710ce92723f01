"""Inputs of Nemotron-H Omni (transformers 5.23 modeling_nemotron_h_omni.py ``NemotronH_Omni_Reasoning_V3``): images as
a patch grid sized to a patch budget, video as frames of a fixed patch count.

Layout ``"patch-budget"`` (multimodal_inputs.py ``layout_of``): a ``get_image_features`` that takes ``image_grid_hw``.
Its image processor (image_processing_nemotron_h_omni.py, class defaults ``patch_size`` 16, ``downsample_ratio``
0.5, ``min_num_patches`` 1024, ``max_num_patches`` 13312, ``max_model_len`` 16384) picks each image's grid
(``get_patch_grid_size``): the image's own grid, ``floor(H / p) + 1`` by ``floor(W / p) + 1`` (Python's
``round(H / p + 0.5)``, which for a whole ``H / p`` rounds half to even), scaled down into the budget
(``min(max((max_model_len - 4) * merge^2, min_num_patches * images), max_num_patches)``: 13,312 patches), scaled
up to ``min_num_patches`` if below it, and each side brought to a multiple of the merge (2: up if the budget allows,
else down). ``pixel_values`` are the patches, ``C * p * p`` values each (channel-major), ``image_grid_hw``
``[[grid_h, grid_w]]`` per image; the model pixel-shuffles 2 x 2 patches into a token: ``grid_h * grid_w / 4`` image
tokens, written ``<img>`` tokens ``</img>`` (the tags are ordinary text tokens).

Video (video_processing_nemotron_h_omni.py, class defaults ``video_target_num_patches`` 1024, aspect kept): every
frame resized to about 1024 patches (``ph = round(sqrt(1024 / aspect))``, ``pw = round(sqrt(1024 * aspect))``, each
brought to a multiple of 2 as for images), ``pixel_values_videos`` ``[frames, C, ph * p, pw * p]``; the model packs
``video_temporal_patch_size`` (2) frames into a tubelet, ``ph * pw / 4`` tokens each, written with the image token
(processing_nemotron_h_omni.py ``replace_video_token``: one ``<img>...</img>`` chunk per tubelet).
"""

from __future__ import annotations

import inspect
import math

import torch

from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec

LONG = torch.int64
MIN_NUM_PATCHES = 1024  # NemotronH_Omni_Reasoning_V3ImageProcessor class defaults (transformers 5.23)
MAX_NUM_PATCHES = 13312
MAX_MODEL_LEN = 16384
VIDEO_TARGET_PATCHES = 1024  # NemotronH_Omni_Reasoning_V3VideoProcessor.video_target_num_patches
TAG_TOKENS = 2  # "<img>" and "</img>" around every image and every tubelet: ordinary text tokens


def is_patch_budget(cls) -> bool:
    return cls is not None and hasattr(cls, "get_image_features") \
        and "image_grid_hw" in inspect.signature(cls.get_image_features).parameters


def _merge(cfg) -> int:
    return round(1 / cfg.downsample_ratio)


def _to_multiple(gh: int, gw: int, merge: int, budget: int) -> tuple[int, int]:
    """Each side to a multiple of ``merge``: up when the grid stays within ``budget``, else down (at least merge)."""
    if gh % merge:
        gh = gh + merge - gh % merge if (gh + merge - gh % merge) * gw <= budget else max(merge, gh - gh % merge)
    if gw % merge:
        gw = gw + merge - gw % merge if gh * (gw + merge - gw % merge) <= budget else max(merge, gw - gw % merge)
    return gh, gw


def image_grid(cfg, height: int, width: int, images: int = 1) -> tuple[int, int]:
    """(grid_h, grid_w) of one image (see the module doc)."""
    p, merge = cfg.vision_config.patch_size, _merge(cfg)
    budget = max(min(max((MAX_MODEL_LEN - 4) * merge ** 2, MIN_NUM_PATCHES * images), MAX_NUM_PATCHES),
                 MIN_NUM_PATCHES)
    gh, gw = round(height / p + 0.5), round(width / p + 0.5)
    factor = min(math.sqrt(budget / (gh * gw)), 1.0)
    gh, gw = math.floor(factor * gh), math.floor(factor * gw)
    if budget > MIN_NUM_PATCHES and gh * gw < MIN_NUM_PATCHES:
        factor = math.sqrt(MIN_NUM_PATCHES / (gh * gw))
        gh, gw = math.ceil(factor * gh), math.ceil(factor * gw)
    return _to_multiple(gh, gw, merge, budget)


def frame_grid(cfg, height: int, width: int) -> tuple[int, int]:
    """(ph, pw) patches of every frame of a video of ``height x width`` frames."""
    merge, aspect = _merge(cfg), width / max(height, 1)
    ph = max(round(math.sqrt(VIDEO_TARGET_PATCHES / aspect)), 1)
    pw = max(round(math.sqrt(VIDEO_TARGET_PATCHES * aspect)), 1)
    up_h, up_w = ph + (merge - ph % merge if ph % merge else 0), pw + (merge - pw % merge if pw % merge else 0)
    if up_h * up_w <= VIDEO_TARGET_PATCHES:
        return up_h, up_w
    return max(merge, ph - ph % merge), max(merge, pw - pw % merge)


def patch_budget_inputs(cfg, opts, defaults, dtype, kit) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch (``kit``: multimodal_inputs.py's shared pieces)."""
    h, w = kit.image_hw(opts.image_size or defaults.get("image_size") or 448)
    frames = getattr(opts, "video_frames", None) or 0
    n = opts.images if opts.images else (0 if frames else kit.images(opts, defaults))
    b, seq = opts.batch_size, kit.seq(opts, defaults)
    v, merge = cfg.vision_config, _merge(cfg)
    gh, gw = image_grid(cfg, h, w, n or 1)
    per_image = gh * gw // merge ** 2
    ph, pw = frame_grid(cfg, h, w) if frames else (0, 0)
    tubelets = -(-frames // cfg.video_temporal_patch_size)
    per_tubelet = ph * pw // merge ** 2
    groups = [per_image] * n + [per_tubelet] * tubelets
    need = 1 + sum(t + TAG_TOKENS for t in groups)
    if seq < need:
        raise kit.too_short(seq, need, f"{n} image(s) of {per_image} tokens"
                            + (f" and {tubelets} video tubelets of {per_tubelet}" if frames else ""))
    ids, _ = kit.sample_text_ids(cfg, b, seq)
    media = torch.zeros(seq, dtype=torch.bool)
    pos = 1
    for tokens in groups:
        media[pos + 1:pos + 1 + tokens] = True
        pos += tokens + TAG_TOKENS
    ids[:, media] = cfg.image_token_id  # video chunks use the image token too (replace_video_token)
    labels = ids.masked_fill(media.expand(b, seq), IGNORE_INDEX)
    channels = getattr(v, "num_channels", 3)
    inputs = [kit.known("input_ids", ids), kit.known("attention_mask", torch.ones(b, seq, dtype=LONG))]
    if n:
        inputs += [InputSpec("pixel_values", (b * n * gh * gw, channels * v.patch_size ** 2), dtype),
                   kit.known("image_grid_hw", torch.tensor([[gh, gw]] * (b * n), dtype=LONG))]
    if frames:
        inputs.append(InputSpec("pixel_values_videos", (b * frames, channels, ph * v.patch_size, pw * v.patch_size),
                                dtype))
    note = (f"{n} image(s) of {h}x{w} px resized to a {gh}x{gw} patch grid ({per_image} tokens each)"
            + (f"; a video of {frames} frames at {ph}x{pw} patches, {tubelets} tubelets of {per_tubelet} tokens"
               if frames else ""))
    return inputs + [kit.known("labels", labels)], note


__all__ = ["frame_grid", "image_grid", "is_patch_budget", "patch_budget_inputs"]
