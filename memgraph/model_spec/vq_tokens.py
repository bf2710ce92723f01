"""VQ-token image models (Chameleon): an image becomes discrete codes of a VQ-GAN, embedded as text tokens.

Chameleon (modeling_chameleon.py, transformers 5.23) encodes each image with its VQ-GAN (``vq_config``): the
encoder halves the image ``len(channel_multiplier) - 1`` times (``ChameleonVQVAEEncoder``: a downsample after every
level but the last), the quantizer picks one codebook entry per cell (``argmin`` of the distances), and
``ChameleonImageVocabularyMapping`` turns each code into a BPE id through the checkpoint's ``vocabulary_map``;
the embeddings of those ids replace the ``<image>`` tokens of the text. Tokens per image::

    (side / 2 ** (len(channel_multiplier) - 1)) ** 2     # 1024 for the released 512 px, [1, 1, 2, 2, 4]

which is the processor's ``image_seq_length`` (processing_chameleon.py, default 1024). The image processor
resizes the shortest edge to 512 and center-crops 512 x 512 (image_processing_chameleon.py ``size`` /
``crop_size``): ``--image-size`` stands for that crop (:data:`VQ_PROCESSOR_SIZES`).

The map comes from the checkpoint's config.json (``vocabulary_map``: every BPE token's name and id, the codebook's
entries named ``IMGIMG`` + the code's digits written as letters A-J + one final letter). The memory of a step needs
only the ``<image>`` id and which ids are image codes (the LM head masks their logits); :func:`synthetic_vocabulary_map`
lays one out from a config's sizes where none is given (the sweep's tiny configs, tests).
"""

from __future__ import annotations

from memgraph.errors import MemgraphError

# image_processing_chameleon.py (transformers 5.23): shortest edge 512, then a 512 x 512 center crop
VQ_PROCESSOR_SIZES = {"chameleon": (512, 512)}
IMAGE_CODE_PREFIX = "IMGIMG"  # ChameleonImageVocabularyMapping.image_tokens: names starting so are image codes
FIRST_CODE_ID = 4  # synthetic maps: the codes after <unk>, <s>, </s>, <pad> (ids 0-3)


def is_vq_tokens(cfg) -> bool:
    """A Chameleon-style config: a ``vq_config`` with a ``channel_multiplier`` and a ``vocabulary_map`` field."""
    vq = getattr(cfg, "vq_config", None)
    return getattr(cfg, "model_type", None) in VQ_PROCESSOR_SIZES and hasattr(vq, "channel_multiplier") \
        and hasattr(cfg, "vocabulary_map")


def vq_tokens_per_image(cfg, height: int, width: int) -> int:
    """Codes of one ``height x width`` image: one per cell of the VQ encoder's output."""
    if cfg.vocabulary_map is None:
        raise MemgraphError(f"this {cfg.model_type} config has no vocabulary_map (its released checkpoint's "
                            "config.json maps the image codes to token ids): pass the checkpoint's config")
    factor = 2 ** (len(cfg.vq_config.channel_multiplier) - 1)
    if height % factor or width % factor:
        raise MemgraphError(f"--image-size {height}x{width}: {cfg.model_type}'s VQ encoder halves the image "
                            f"{factor.bit_length() - 1} times: pass sides that are multiples of {factor}")
    return (height // factor) * (width // factor)


def code_name(code: int) -> str:
    """The vocabulary name of image code ``code`` (``IMGIMG`` + digits as letters A-J + ``Z``)."""
    return IMAGE_CODE_PREFIX + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def synthetic_vocabulary_map(codes: int, vocab_size: int) -> dict[str, int]:
    """A ``vocabulary_map`` for ``codes`` image codes at ids ``FIRST_CODE_ID ..``, ``<image>`` the next id."""
    image_id = FIRST_CODE_ID + codes
    if image_id >= vocab_size:
        raise ValueError(f"{codes} image codes and <image> do not fit a vocabulary of {vocab_size}")
    return {**{code_name(c): FIRST_CODE_ID + c for c in range(codes)}, "<image>": image_id}


__all__ = ["VQ_PROCESSOR_SIZES", "is_vq_tokens", "vq_tokens_per_image", "synthetic_vocabulary_map", "code_name"]
