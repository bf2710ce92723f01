"""Mixed-precision rules (CUDA autocast policy)."""

from .autocast_policy import (
    BANNED_OPS,
    FP32_OPS,
    LOWER_PRECISION_OPS,
    PROMOTE_OPS,
    autocast_kind,
    autocast_policy,
)

__all__ = ["BANNED_OPS", "FP32_OPS", "LOWER_PRECISION_OPS", "PROMOTE_OPS", "autocast_kind", "autocast_policy"]
