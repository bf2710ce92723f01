"""Bring your own model: a ModelSpec from a Python object (the Python API's ``memgraph.analyze(obj)``).

* an ``nn.Module`` instance: traced on a copy (``copy.deepcopy``, then moved to meta for a trace); build it
  under ``torch.device("meta")`` and the copy costs nothing. It is never modified;
* a zero-argument callable returning an ``nn.Module`` (a factory: called under the target device, as
  ``module:function`` models are);
* a transformers ``PretrainedConfig`` whose ``architectures[0]`` names the head (as in a config.json), e.g.
  ``LlamaConfig(..., architectures=["LlamaForCausalLM"])``.

Modules and factories are ``custom`` models: their inputs are ``--input`` specs (``inputs=(...)``), passed
positionally in the order given, and the loss is the output if it is a scalar, else ``output.loss``, else the
sum of the output (:func:`memgraph.model_spec.tasks.loss_from_outputs`).
"""

from __future__ import annotations

import copy

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.sources import ModelSpec
from memgraph.model_spec.tasks import task_for_class


def spec_from_object(obj) -> ModelSpec:
    """A ModelSpec for an ``nn.Module``, a zero-argument factory, or a transformers ``PretrainedConfig``."""
    if isinstance(obj, ModelSpec):
        return obj
    if isinstance(obj, torch.nn.Module):
        name = type(obj).__name__
        return ModelSpec(name=name, source="callable", task="custom", factory=_copier(obj))
    if _is_config(obj):
        return _from_config_object(obj)
    if callable(obj):
        name = getattr(obj, "__qualname__", None) or type(obj).__name__
        return ModelSpec(name=name, source="callable", task="custom", factory=obj)
    raise MemgraphError(f"cannot analyze a {type(obj).__name__}: pass a model name or path, an nn.Module, "
                        "a zero-argument function returning one, or a transformers PretrainedConfig")


def _copier(module: torch.nn.Module):
    def factory() -> torch.nn.Module:
        return copy.deepcopy(module)

    return factory


def _is_config(obj) -> bool:
    try:
        from transformers import PretrainedConfig
    except ImportError:  # pragma: no cover - transformers is a dependency
        return False
    return isinstance(obj, PretrainedConfig)


def _from_config_object(cfg) -> ModelSpec:
    architectures = getattr(cfg, "architectures", None) or []
    if not architectures:
        raise MemgraphError(f"{type(cfg).__name__} names no head: set architectures, e.g. "
                            f"{type(cfg).__name__}(..., architectures=[\"LlamaForCausalLM\"])")
    cls = architectures[0]
    task = task_for_class(cls)
    if task is None:
        raise MemgraphError(f"no training task known for {cls!r}; supported heads: *ForCausalLM, *LMHeadModel, "
                            "*ForMaskedLM, *ForImageClassification, T5/Bart/Whisper, CLIP/SigLIP, image-text-to-text and speech-seq2seq classes of transformers' auto mappings")
    return ModelSpec(name=f"{cfg.model_type} ({cls})", source="config", task=task, config=copy.deepcopy(cfg),
                     model_class=cls)


__all__ = ["spec_from_object"]
