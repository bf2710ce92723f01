"""VQ-token image models (Chameleon, Emu3): an image becomes discrete codes of a VQ-GAN, embedded as text tokens.

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

Emu3 (modeling_emu3.py) is built the same way, with its own names (``<|visual token 000123|>``) and one more token
per row of codes: ``convert_img2bpe`` appends the end-of-line id (``<|extra_200|>``) to each row, so an image of
``h x w`` pixels takes ``(h / 8) * (w / 8 + 1)`` tokens (processing_emu3.py ``image_seq_length = height * (width +
1)``, its ``downsample_ratio`` 8 = 2 ** (len(channel_multiplier) - 1) of the released [1, 2, 2, 4]). Its image
processor resizes by pixel count (image_processing_emu3.py ``smart_resize``: sides multiples of ``spatial_factor``
8, pixels within ``min_pixels`` 512 * 512 .. ``max_pixels`` 1024 * 1024, the class defaults; ``--min-pixels`` /
``--max-pixels`` set them) and the model reads each image's ``image_sizes``.
"""

from __future__ import annotations

from memgraph.errors import MemgraphError

# image_processing_chameleon.py (transformers 5.23): shortest edge 512, then a 512 x 512 center crop; Emu3: the
# smallest image its processor makes (min_pixels 512 * 512, a square)
VQ_PROCESSOR_SIZES = {"chameleon": (512, 512), "emu3": (512, 512)}
# image_processing_emu3.py (transformers 5.23) Emu3ImageProcessor class defaults
EMU3_MIN_PIXELS, EMU3_MAX_PIXELS, EMU3_SPATIAL_FACTOR = 512 * 512, 1024 * 1024, 8
EMU3_EOL = "<|extra_200|>"  # Emu3ImageVocabularyMapping.eol_token_id
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
    return (height // factor) * (width // factor + (cfg.model_type == "emu3"))  # Emu3: an end-of-line per row


def resizes_by_pixels(cfg) -> bool:
    """Emu3's processor resizes by pixel count (``--min-pixels`` / ``--max-pixels`` apply)."""
    return getattr(cfg, "model_type", None) == "emu3"


def processed_size(cfg, opts, height: int, width: int, smart_resize) -> tuple[int, int]:
    """The image's size after the processor: Chameleon's crop is ``--image-size`` itself; Emu3's ``smart_resize``
    (multimodal_inputs.py's, handed in: that module imports this one)."""
    if not resizes_by_pixels(cfg):
        return height, width
    lo = getattr(opts, "min_pixels", None) or EMU3_MIN_PIXELS
    hi = getattr(opts, "max_pixels", None) or EMU3_MAX_PIXELS
    if lo > hi:
        raise MemgraphError(f"--min-pixels {lo:,} is above --max-pixels {hi:,}: pass a min_pixels at most max_pixels")
    return smart_resize(height, width, factor=EMU3_SPATIAL_FACTOR, min_pixels=lo, max_pixels=hi)


def code_name(code: int, model_type: str = "chameleon") -> str:
    """The vocabulary name of image code ``code``: Chameleon's ``IMGIMG`` + digits as letters A-J + ``Z``, Emu3's
    ``<|visual token 000123|>`` (its mapping reads the code from ``name[-8:-2]``)."""
    if model_type == "emu3":
        return f"<|visual token {code:06d}|>"
    return IMAGE_CODE_PREFIX + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def synthetic_vocabulary_map(codes: int, vocab_size: int, model_type: str = "chameleon") -> dict[str, int]:
    """A ``vocabulary_map`` for ``codes`` image codes at ids ``FIRST_CODE_ID ..``, then ``<image>`` (and Emu3's
    end-of-line token)."""
    extra = ["<image>"] + ([EMU3_EOL] if model_type == "emu3" else [])
    if FIRST_CODE_ID + codes + len(extra) > vocab_size:
        raise ValueError(f"{codes} image codes and {extra} do not fit a vocabulary of {vocab_size}")
    names = [code_name(c, model_type) for c in range(codes)] + extra
    return {name: FIRST_CODE_ID + i for i, name in enumerate(names)}


__all__ = ["VQ_PROCESSOR_SIZES", "is_vq_tokens", "resizes_by_pixels", "processed_size", "vq_tokens_per_image", "synthetic_vocabulary_map", "code_name"]
