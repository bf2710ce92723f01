"""Image-text heads that transformers ships without a training loss: memgraph cannot train them as released.

DiffusionGemma (transformers 5.23, modeling_diffusion_gemma.py ``DiffusionGemmaForBlockDiffusion.forward``) takes
no ``labels`` and returns no loss (its output's ``loss`` is never set): its block-diffusion objective (noising a
canvas block, the self-conditioning pass, the denoising loss) lives in a training script that transformers does not
ship and that memgraph has no copy of; and it takes images only as precomputed ``mm_encoder_outputs``, not pixels.
A row of such a head is refused with that reason, which names what is missing, rather than "no input layout".
"""

from __future__ import annotations

import inspect

# parameters through which a head could take pixels of an image (its own vision tower in the step)
PIXEL_INPUTS = ("pixel_values", "pixel_values_videos", "images")


def missing_training_loss(cls) -> str:
    """The reason ``cls`` cannot be trained as transformers ships it, else '': its forward takes no ``labels``,
    returns no loss and takes no pixels (images only as precomputed encoder outputs)."""
    if cls is None:
        return ""
    try:
        params = inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):
        return ""
    if "labels" in params or any(p in params for p in PIXEL_INPUTS) or "mm_encoder_outputs" not in params:
        return ""
    return (f"{cls.__name__} has no training loss in transformers (its block-diffusion loss is in a training "
            "script outside it) and takes images only as mm_encoder_outputs: use --input and --loss")


__all__ = ["missing_training_loss"]
