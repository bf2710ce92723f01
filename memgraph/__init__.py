"""memgraph: predict the GPU memory of a PyTorch training step without a GPU.

Data flow: model spec -> trace (meta device) -> annotate -> liveness/peak -> allocator -> report.
"""

__version__ = "0.1.0"

from .api import analyze, measure  # noqa: E402  (public API)

__all__ = ["analyze", "measure", "__version__"]
