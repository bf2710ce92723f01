"""Whether a config's vision tower needs a package memgraph does not install.

Gemma 3n, FastVLM and PerceptionLM build their vision tower with ``AutoModel.from_config(config.vision_config)``
(modeling_gemma3n.py, modeling_fast_vlm.py, modeling_perception_lm.py), which transformers 5.23 maps to
``TimmWrapperModel`` (models/auto/modeling_auto.py: ``gemma3n_vision`` and ``timm_wrapper``); its constructor calls
``requires_backends(self, ["vision", "timm"])``, an ImportError naming the package when timm is missing. Building
the tower on ``meta`` (no memory) asks exactly that question, as the model itself would.
"""

from __future__ import annotations

import copy
import re

import torch

# transformers' requires_backends message, one paragraph per missing backend (utils/import_utils.py BACKENDS_MAPPING:
# "{0} requires the timm library but it was not found in your environment. ...")
_REQUIRES = re.compile(r"(\S+) requires the (\S+) library")


def missing_vision_backend(cfg) -> str | None:
    """What the vision tower's constructor says it lacks, ``"TimmWrapperModel requires PIL, timm"`` (every missing
    package its ImportError names), else None (no vision config, no class for it, or a tower that builds)."""
    from transformers.models.auto import modeling_auto

    from memgraph.model_spec.auto_classes import auto_class

    vision = getattr(cfg, "vision_config", None)
    cls = auto_class(vision, modeling_auto.MODEL_MAPPING_NAMES) if vision is not None else None
    if cls is None:
        return None
    try:
        with torch.device("meta"):
            cls(copy.deepcopy(vision))
    except ImportError as e:
        found = _REQUIRES.findall(str(e))
        if not found:
            return str(e).strip().splitlines()[0].strip()
        return f"{found[0][0]} requires {', '.join(dict.fromkeys(lib for _, lib in found))}"
    except Exception:
        return None
    return None


__all__ = ["missing_vision_backend"]
