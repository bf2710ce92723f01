"""GPU facts a CPU-only trace cannot observe: device catalog and CUDA attention-kernel selection."""

from .attention import (
    SdpaCall,
    choose_sdpa_backend,
    saved_for_backward_bytes,
    transformers_attention_backend,
    transformers_saved_for_backward_bytes,
    transformers_sdpa_call,
)
from .catalog import GPUS, GpuSpec, get_gpu

__all__ = [
    "GPUS",
    "GpuSpec",
    "SdpaCall",
    "choose_sdpa_backend",
    "get_gpu",
    "saved_for_backward_bytes",
    "transformers_attention_backend",
    "transformers_saved_for_backward_bytes",
    "transformers_sdpa_call",
]
