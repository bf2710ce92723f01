"""Inputs of image-text models whose text holds no image token: the image enters beside the text.

Layout ``"prefix"`` (multimodal_inputs.py ``layout_of``): a vision tower of fixed ``image_size`` and no image token
id in the config, a model whose ``forward`` takes ``pixel_values`` and ``labels``. Every image is resized by its
processor to the tower's ``image_size``; the model itself joins it to the text (transformers 5.23):

- BLIP (modeling_blip.py ``BlipForConditionalGeneration``): the text decoder cross-attends to the image features;
- GIT (modeling_git.py): ``(image_size / patch_size)^2 + 1`` image embeddings prepended inside the model, the loss
  on the text positions only (``logits[:, num_image_tokens:-1]``);
- encoder-decoders with an image encoder (PP-FormulaNet): ``pixel_values`` to the encoder, the text to the
  decoder (the model shifts ``input_ids`` into ``decoder_input_ids``) and as its target;
- Kosmos-2 (processing_kosmos2.py ``preprocess_examples``): ``<image>`` then ``latent_query_num`` (64) placeholder
  tokens then ``</image>`` after BOS, ``image_embeds_position_mask`` 1 on the placeholders, where the model puts
  its image-to-text resampler's latents.

One image per sample, ``pixel_values`` ``[B, C, s, s]``; ``input_ids`` ordinary text, ``labels`` the ``input_ids``
(ignoring Kosmos-2's placeholders), ``attention_mask`` all ones.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX, InputSpec


def is_vision_prefix(cfg, cls) -> bool:
    """A fixed-size vision tower whose model takes ``pixel_values`` and ``labels`` (the caller checks that the
    config names no image token)."""
    if cls is None or any(hasattr(cfg, n) for n in ("image_token_id", "image_token_index")):
        return False  # a config that names an image token (even None: MiniCPM-V) puts image tokens in the text
    params = inspect.signature(cls.forward).parameters
    # Idefics (1) also needs image_attention_mask, which this layout does not make
    return "pixel_values" in params and "labels" in params and "image_attention_mask" not in params


def vision_prefix_inputs(cfg, cls, b: int, seq: int, images: int, size: tuple[int, int], dtype, text_ids,
                         known, image_input, vision) -> list[InputSpec]:
    """The inputs of one batch (``text_ids``: ``[b, seq]`` ordinary token ids; ``known`` / ``image_input`` make
    multimodal_inputs.py's KnownInput / ImageInput; ``vision``: the vision tower's config)."""
    if images != 1:
        raise MemgraphError(f"--images {images}: {cfg.model_type} takes one image per sample: drop --images")
    params = inspect.signature(cls.forward).parameters
    channels = getattr(vision, "num_channels", None) or 3
    ids = text_ids.clone()
    text = cfg.get_text_config()
    bos = getattr(text, "bos_token_id", None)
    if isinstance(bos, int):
        ids[:, 0] = bos
    labels = ids.clone()
    inputs = [image_input("pixel_values", (b, channels, *size), dtype)]
    if "image_embeds_position_mask" in params:  # Kosmos-2
        latents = int(cfg.latent_query_num)
        if seq < latents + 4:
            raise MemgraphError(f"--seq-len {seq} cannot hold Kosmos-2's {latents} image positions with text: pass "
                                f"--seq-len {latents + 4} or more")
        mask = torch.zeros(b, seq, dtype=torch.int64)
        mask[:, 2:2 + latents] = 1  # [BOS] <image> latents... </image> text
        labels = labels.masked_fill(mask.bool(), IGNORE_INDEX)
        inputs.append(known("image_embeds_position_mask", mask))
    if "decoder_input_ids" in params and "input_ids" not in params:
        # VisionEncoderDecoder: no encoder text; the decoder reads the labels shifted right behind
        # decoder_start_token_id (modeling_vision_encoder_decoder.py shift_tokens_right), made here as the model
        # makes them, since it reads config.pad_token_id for that, which only a released config sets
        if not isinstance(getattr(cfg, "decoder_start_token_id", None), int):
            raise MemgraphError(f"this {cfg.model_type} config sets no decoder_start_token_id (the decoder's first "
                                "token): set it in the config, as the released checkpoints do")
        start = torch.full((b, 1), cfg.decoder_start_token_id, dtype=torch.int64)
        shifted = torch.cat([start, labels[:, :-1]], dim=1)
        return [*inputs, known("decoder_input_ids", shifted), known("labels", labels)]
    if "decoder_input_ids" in params:
        # an image encoder and a text decoder: the text is the decoder's (PP-FormulaNet shifts input_ids into the
        # decoder_input_ids, modeling_pp_formulanet.py shift_tokens_right) and its target
        return [known("input_ids", ids), *inputs, known("labels", labels)]
    return [known("input_ids", ids), *inputs, known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
            known("labels", labels)]


__all__ = ["is_vision_prefix", "vision_prefix_inputs"]
