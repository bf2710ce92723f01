"""The number of repeated layers of a transformers model, and the same model spec at another depth.

Depth synthesis (:mod:`memgraph.trace.shortcuts.depth`) traces a model at two small depths and repeats one layer.
This module only reads and changes the config: :func:`model_depth` says how many layers the model has
(or why its depth cannot be changed safely), :func:`with_depth` returns a spec whose config has another
number of layers and is otherwise the same object graph (a deep copy: the caller's spec is unchanged).

The depth field is transformers' ``num_hidden_layers``, which every decoder-only config defines or
aliases through ``PretrainedConfig.attribute_map`` (transformers 5.23, configuration_utils.py:
``PretrainedConfig.__setattr__``/``__getattribute__`` map e.g. GPT-2's ``n_layer`` to it), so one
``setattr`` changes the field the modelling code reads.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from memgraph.model_spec.sources import ModelSpec

# Config fields that place a second stack of layers beside the one num_hidden_layers counts (encoder-decoder
# models, sub-configs of multimodal models): depth synthesis repeats one stack only.
_SECOND_STACK_FIELDS = ("num_decoder_layers", "decoder_layers", "encoder_layers", "num_encoder_layers")


def model_depth(spec: ModelSpec) -> tuple[int | None, str | None]:
    """``(layers, None)`` when ``spec``'s depth can be changed by one config field, else ``(None, why)``."""
    config = spec.config
    if spec.source == "callable" or config is None:
        return None, "a module:function model has no config depth field"
    subs = [name for name in getattr(type(config), "sub_configs", {}) or {} if getattr(config, name, None) is not None]
    if subs:
        return None, f"the config has sub-configs ({', '.join(sorted(subs))}): more than one stack of layers"
    if getattr(config, "is_encoder_decoder", False):
        return None, "an encoder-decoder model has two stacks of layers"
    depth = getattr(config, "num_hidden_layers", None)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        return None, "the config has no num_hidden_layers"
    second = [f for f in _SECOND_STACK_FIELDS if isinstance(getattr(config, f, None), int)]
    if second:
        return None, f"the config has a second stack ({second[0]})"
    per_layer = _per_layer_fields(config, depth)
    if per_layer:
        return None, f"the config has per-layer settings ({', '.join(per_layer)})"
    return depth, None


def _per_layer_fields(config, depth: int) -> list[str]:
    """Config fields that make layers differ: a list with one entry per layer that is not the same entry
    throughout (``layer_types`` alternating sliding and full attention), any other list naming layers
    (``mlp_only_layers``), or a layer frequency (MoE every other layer)."""
    names = []
    for name, value in config.to_dict().items():
        if isinstance(value, (list, tuple)) and value and (len(value) == depth or "layer" in name):
            if not (len(value) == depth and name in _UNIFORM_LISTS and len(set(map(repr, value))) == 1):
                names.append(name)
        elif name in _LAYER_FREQUENCIES and value not in (None, 0, 1):
            names.append(name)
        elif name == "first_k_dense_replace" and value:
            names.append(name)
    return sorted(names)


# Per-layer lists transformers fills with one entry per layer at config init; when every entry is the same
# the model at another depth has the same entry for each of its layers (transformers 5.23,
# models/qwen2/configuration_qwen2.py Qwen2Config.__post_init__: layer_types = ["full_attention"] * n unless
# use_sliding_window).
_UNIFORM_LISTS = ("layer_types",)
# Fields that make every n-th layer different (MoE every other layer, ...): refused unless 0/1/None.
_LAYER_FREQUENCIES = ("decoder_sparse_step", "moe_layer_freq", "sliding_window_pattern",
                      "interleave_moe_layer_step", "no_rope_layer_interval")


def with_depth(spec: ModelSpec, layers: int) -> ModelSpec:
    """``spec`` with ``layers`` repeated layers: a copy of its config with ``num_hidden_layers`` set (and a
    uniform per-layer list such as ``layer_types`` resized)."""
    config = copy.deepcopy(spec.config)
    depth = config.num_hidden_layers
    for name in _UNIFORM_LISTS:
        value = getattr(config, name, None)
        if isinstance(value, (list, tuple)) and len(value) == depth:
            setattr(config, name, type(value)([value[0]] * layers))
    config.num_hidden_layers = layers
    return replace(spec, config=config)


__all__ = ["model_depth", "with_depth"]
