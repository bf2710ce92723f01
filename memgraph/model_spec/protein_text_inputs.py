"""Inputs of protein-text models: Evolla (``EvollaForProteinText2Text``, transformers 5.23 modeling_evolla.py).

Layout ``"protein"`` (multimodal_inputs.py ``layout_of``): a config with a ``protein_encoder_config`` and a class
whose ``forward`` takes ``protein_input_ids``. Evolla answers questions about a protein: a SaProt encoder reads the
protein, a resampler compresses it into ``resampler_num_latents`` latents, and the Llama text model cross-attends to
them (no placeholder token in the text). Its processor (processing_evolla.py ``EvollaProcessor``) makes:

- ``protein_input_ids`` ``[B, P]``: the structure-aware sequence, one SaProt token per residue (amino acid plus its
  Foldseek letter) with ``<cls>`` and ``<eos>`` around it, truncated to ``protein_max_length`` and padded to the
  longest protein of the batch; ``protein_attention_mask`` ``[B, P]``;
- ``input_ids`` / ``attention_mask`` of the chat text (``text_max_length``), and ``labels`` for training.

What it needs beyond an image-text model: a protein, i.e. its amino-acid sequence and its Foldseek structure string
(from a predicted or solved structure; memgraph takes neither). The recipe's protein fills the processor's
``protein_max_length`` (1024 tokens, the class default, ``EvollaProcessor.__init__``; its longest protein, the
memory's worst case), capped at the encoder's ``max_position_embeddings``; its tokens are ordinary SaProt tokens
(none of the special ids below ``FIRST_RESIDUE_TOKEN``), all attended.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import InputSpec

PROTEIN_MAX_LENGTH = 1024  # EvollaProcessor(protein_max_length=1024), processing_evolla.py, transformers 5.23
# SaProt's vocabulary (EsmTokenizer layout): <cls> 0, <pad> 1, <eos> 2, <unk> 3, <mask> 4, then the residue tokens
FIRST_RESIDUE_TOKEN = 5


def is_protein_text(cfg, cls) -> bool:
    """A protein-text model: a protein encoder config and a class that takes ``protein_input_ids``."""
    return (cls is not None and getattr(cfg, "protein_encoder_config", None) is not None
            and "protein_input_ids" in inspect.signature(cls.forward).parameters)


def protein_tokens(cfg) -> int:
    """Tokens of the recipe's protein: the processor's cap, within the encoder's positions."""
    return min(PROTEIN_MAX_LENGTH, int(getattr(cfg.protein_encoder_config, "max_position_embeddings", None)
                                       or PROTEIN_MAX_LENGTH))


def protein_text_inputs(cfg, b: int, seq: int, images: int | None, text_ids, generator,
                        known) -> tuple[list[InputSpec], str]:
    """(inputs, note) of one batch; ``text_ids``: ``[b, seq]`` ordinary text ids, ``generator`` for the protein."""
    if images:
        raise MemgraphError(f"--images {images}: {cfg.model_type} reads a protein, not images: drop --images")
    p = protein_tokens(cfg)
    vocab = cfg.protein_encoder_config.vocab_size
    protein = torch.randint(FIRST_RESIDUE_TOKEN, vocab, (b, p), generator=generator, dtype=torch.int64)
    inputs = [known("input_ids", text_ids), known("attention_mask", torch.ones(b, seq, dtype=torch.int64)),
              known("protein_input_ids", protein), known("protein_attention_mask", torch.ones(b, p, dtype=torch.int64)),
              known("labels", text_ids.clone())]
    note = (f"one protein of {p} SaProt tokens per sample (EvollaProcessor's protein_max_length; a protein needs its "
            f"amino-acid and Foldseek strings) and {seq} text tokens")
    return inputs, note


__all__ = ["FIRST_RESIDUE_TOKEN", "PROTEIN_MAX_LENGTH", "is_protein_text", "protein_text_inputs", "protein_tokens"]
