"""The pixel budget of processors that resize by pixel count (Qwen2-VL's ``smart_resize``): ``--min-pixels`` /
``--max-pixels``, else the released checkpoint's ``preprocessor_config.json``, else the processor class's default.

Qwen2-VL's image processor (transformers 5.23 ``models/qwen2_vl/image_processing_qwen2_vl.py``, also used by
Qwen2.5-VL and Qwen3-VL) keeps each image's pixel count within ``size = {"shortest_edge": min_pixels,
"longest_edge": max_pixels}``; its class default is 56*56 .. 28*28*1280 = 3,136 .. 1,003,520 pixels, but the
released checkpoints override it: Qwen/Qwen2-VL-2B-Instruct and -7B-Instruct ship ``"min_pixels": 3136,
"max_pixels": 12845056`` in their preprocessor_config.json, so a real pipeline resizes a 2048-px image to
2044x2044, not to 980x980. Zoo entries carry the checkpoint's figures as ``defaults.min_pixels`` /
``defaults.max_pixels`` (with the source in their notes).
"""

from __future__ import annotations

from dataclasses import dataclass

from memgraph.errors import MemgraphError

# transformers 5.23 Qwen2VLImageProcessor.size (image_processing_qwen2_vl.py): the class default
CLASS_MIN_PIXELS = 56 * 56
CLASS_MAX_PIXELS = 28 * 28 * 1280
CLASS_SOURCE = "transformers 5.23 Qwen2VLImageProcessor's class default"


@dataclass(frozen=True)
class PixelBudget:
    """The pixel-count range an image is resized into, and where each bound came from."""

    min_pixels: int
    max_pixels: int
    min_source: str
    max_source: str

    def describe(self) -> str:
        if self.min_source == self.max_source:
            return f"min_pixels {self.min_pixels:,}, max_pixels {self.max_pixels:,} ({self.max_source})"
        return (f"min_pixels {self.min_pixels:,} ({self.min_source}), "
                f"max_pixels {self.max_pixels:,} ({self.max_source})")


def pixel_budget(opts, defaults: dict) -> PixelBudget:
    """The budget from the flags, else the zoo entry's checkpoint figures, else the class default."""
    lo, lo_src = _bound(getattr(opts, "min_pixels", None), defaults.get("min_pixels"), CLASS_MIN_PIXELS)
    hi, hi_src = _bound(getattr(opts, "max_pixels", None), defaults.get("max_pixels"), CLASS_MAX_PIXELS)
    if lo > hi:
        raise MemgraphError(f"--min-pixels {lo:,} is above --max-pixels {hi:,}: pass a min_pixels at most max_pixels")
    return PixelBudget(lo, hi, lo_src.replace("{flag}", "--min-pixels"), hi_src.replace("{flag}", "--max-pixels"))


def _bound(flag, checkpoint, class_default) -> tuple[int, str]:
    if flag is not None:
        return int(flag), "{flag}"
    if checkpoint is not None:
        return int(checkpoint), "the checkpoint's preprocessor_config.json"
    return class_default, CLASS_SOURCE


def refuse_pixel_flags(opts, model_type: str) -> None:
    """``--min-pixels`` / ``--max-pixels`` on a model whose processor does not resize by pixel budget."""
    for name in ("min_pixels", "max_pixels"):
        if getattr(opts, name, None) is not None:
            flag = "--" + name.replace("_", "-")
            raise MemgraphError(f"{flag} applies to processors that resize by pixel count (Qwen2-VL-style "
                                f"smart_resize); this {model_type} model's processor does not: drop {flag}")


__all__ = ["PixelBudget", "pixel_budget", "refuse_pixel_flags", "CLASS_MIN_PIXELS", "CLASS_MAX_PIXELS"]
