"""Training stages of vision-language models, defined by modality group (not by model name).

LLaVA-style training (Liu et al., "Visual Instruction Tuning"):
stage 1 (feature alignment) trains only the projector; stage 2 (visual instruction tuning)
trains the projector and the language model with the vision encoder frozen; full fine-tuning
trains everything. ``--train`` / ``--freeze`` patterns then narrow the stage's set.
"""

from __future__ import annotations

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.modality import module_modalities

TRAINED_GROUPS = {"1": ("projector",), "2": ("projector", "language model")}


def apply_stage(model: torch.nn.Module, stage: str | None) -> None:
    """Freeze every parameter outside the stage's modality groups."""
    if stage in (None, "full"):
        return
    groups = TRAINED_GROUPS[stage]
    modalities = module_modalities(model)
    present = sorted(set(modalities.values()))
    if not all(g in present for g in groups):
        raise MemgraphError(
            f"--stage {stage} trains the {' and '.join(groups)}, but this model's groups are {', '.join(present)}: "
            "stages apply to vision-language models; use --train/--freeze patterns instead"
        )
    for name, module in model.named_modules():
        trains = modalities.get(name) in groups
        for p in module.parameters(recurse=False):
            if not trains:
                p.requires_grad_(False)
