"""Inputs of image-text-to-text classes that take no image.

transformers 5.23 maps some model types to a text-only class in ``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES``
(modeling_auto.py: ``("mistral4", "Mistral4ForCausalLM")``; Mistral Small 4's released checkpoint pairs a
Pixtral tower with a Mistral 4 text model in ``Mistral3ForConditionalGeneration``, whose own row is mistral3). Such
a class's ``forward`` has no image input (no parameter named ``pixel_values*``, nor a vision config), so its batch
is the causal-LM one: ``input_ids`` ``[B, seq]`` of ordinary tokens, ``attention_mask`` all ones, ``labels`` the
``input_ids``; the report's notes say that the class takes no image.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import InputSpec


def is_text_only(cfg, cls) -> bool:
    """The image-text class has no image input: no vision config and no ``pixel_values*`` parameter."""
    if cls is None or getattr(cfg, "vision_config", None) is not None:
        return False
    params = inspect.signature(cls.forward).parameters
    return "input_ids" in params and "labels" in params and not any(p.startswith("pixel_values") for p in params)


def text_only_inputs(cfg, cls, b: int, seq: int, images: int | None, text_ids, known) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch; ``text_ids``: ``[b, seq]`` ordinary token ids."""
    if images:
        raise MemgraphError(f"--images {images}: {cls.__name__} (transformers' image-text-to-text class for "
                            f"{cfg.model_type}) takes no image: drop --images")
    note = (f"{cls.__name__} takes no image (transformers maps {cfg.model_type} to it for image-text-to-text): "
            f"text only, {seq} tokens")
    return [known("input_ids", text_ids), known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
            known("labels", text_ids.clone())], note


__all__ = ["is_text_only", "text_only_inputs"]
