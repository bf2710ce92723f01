"""Inputs of vision-language-action policies: PI0 (transformers 5.23 modeling_pi0.py ``PI0ForConditionalGeneration``).

Layout ``"policy"`` (multimodal_inputs.py ``layout_of``): a class whose ``forward`` takes ``state`` and ``actions``
and a config with a ``vlm_config`` (PaliGemma). A training step is flow matching: the model samples a timestep and
noise itself, mixes the noise into the ground-truth ``actions`` and is trained (MSE) to predict the velocity; the
VLM reads the camera images and the prompt, a DiT (Gemma) reads the state and the noisy actions. Its processor
(processing_pi0.py ``PI0Processor``, class defaults) makes:

- ``input_ids``: ``image_seq_length`` image tokens per camera image (PaliGemma's ``(image_size / patch_size)^2``,
  256 for 224 px / 14 px; image_processing_pi0.py ``image_seq_length = 256``), BOS, the prompt, padded to
  ``max_length`` 48 (``padding="max_length"``); here the text fills ``--seq-len``;
- ``pixel_values`` ``[B, cameras, C, s, s]`` at the tower's ``image_size`` and ``pixel_attention_mask``
  ``[B, cameras]`` (``--images`` cameras per sample, every one present);
- ``state`` ``[B, max_state_dim]`` and ``actions`` ``[B, chunk_size, max_action_dim]``, normalised with the dataset's
  statistics and zero-padded (released configs: 32, 50, 32).

What it needs beyond an image-text model: a robot state vector and an action chunk per sample (memgraph makes them
as random floats of those shapes; their values do not change the memory).
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import InputSpec

LONG = torch.int64


def is_policy(cfg, cls) -> bool:
    if cls is None or getattr(cfg, "vlm_config", None) is None:
        return False
    params = inspect.signature(cls.forward).parameters
    return all(p in params for p in ("state", "actions", "pixel_values", "input_ids"))


def image_seq_length(vlm) -> int:
    """PaliGemma's image tokens per image: ``(image_size / patch_size)^2``."""
    v = vlm.vision_config
    return (v.image_size // v.patch_size) ** 2


def policy_inputs(cfg, opts, defaults, dtype, kit) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch (``kit``: multimodal_inputs.py's shared pieces)."""
    vlm = cfg.vlm_config
    v = vlm.vision_config
    native = (v.image_size, v.image_size)
    size = kit.image_hw(opts.image_size or defaults.get("image_size") or native)
    if size != native:
        raise MemgraphError(f"{cfg.model_type}'s cameras are {native[0]}x{native[1]} images (its processor resizes "
                            f"and pads to that); got --image-size {size[0]}x{size[1]}: pass --image-size {native[0]}")
    cams, b, seq = kit.images(opts, defaults), opts.batch_size, kit.seq(opts, defaults)
    image_tokens = cams * image_seq_length(vlm)
    if seq < image_tokens + 2:
        raise kit.too_short(seq, image_tokens + 1, f"{cams} camera image(s) of {image_seq_length(vlm)} tokens")
    ids, _ = kit.sample_text_ids(vlm, b, seq)
    ids[:, :image_tokens] = vlm.image_token_id
    bos = getattr(vlm.get_text_config(), "bos_token_id", None)
    if isinstance(bos, int):
        ids[:, image_tokens] = bos
    inputs = [kit.known("input_ids", ids), kit.known("attention_mask", torch.ones(b, seq, dtype=LONG)),
              kit.image_input("pixel_values", (b, cams, getattr(v, "num_channels", 3), *native), dtype),
              kit.known("pixel_attention_mask", torch.ones(b, cams, dtype=torch.bool)),
              InputSpec("state", (b, cfg.max_state_dim), dtype),
              InputSpec("actions", (b, cfg.chunk_size, cfg.max_action_dim), dtype)]
    note = (f"{cams} camera image(s) of {native[0]} px ({image_seq_length(vlm)} tokens each) and the prompt in {seq} "
            f"tokens; state [{cfg.max_state_dim}], an action chunk [{cfg.chunk_size}, {cfg.max_action_dim}] "
            "(flow-matching loss; the model samples its timestep and noise)")
    return inputs, note


__all__ = ["image_seq_length", "is_policy", "policy_inputs"]
