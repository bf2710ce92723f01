"""Config fields that size a tensor, checked up front: a bad value is refused with its name, never traced.

transformers validates few of these (``intermediate_size: 0`` builds empty weights and trains on nothing,
``num_attention_heads: 0`` divides by zero inside the model, ``num_hidden_layers: 1000000`` runs for an
hour), so memgraph checks every config (and its sub-configs: ``text_config``, ``vision_config``, ...)
before building.

Limits come from what a trace can represent, not from taste:

* ``MAX_LAYERS``: each layer costs about 0.1 s and a few hundred kB of event log per traced iteration
  (benchmarks/trace_speed.py), so 2,048 layers in one stack is minutes of tracing; published models
  stop at a few hundred (llama-3.1-405b: 126).
* ``MAX_DIM``: a width above 2**24 makes a single square weight 2**48 elements, beyond what any GPU
  holds by a factor of a thousand, and above what exact float arithmetic in the reports keeps.
"""

from __future__ import annotations

import math

from memgraph.errors import MemgraphError

MAX_LAYERS = 2048
MAX_DIM = 1 << 24

# Whole numbers >= 1 (None allowed where transformers derives a default, e.g. n_inner, head_dim).
_LAYER_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers")
_SIZE_FIELDS = (
    "hidden_size", "n_embd", "d_model", "d_ff", "d_kv", "intermediate_size", "n_inner", "ffn_dim",
    "encoder_ffn_dim", "decoder_ffn_dim", "num_attention_heads", "n_head", "encoder_attention_heads",
    "decoder_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "patch_size", "num_channels",
    "num_mel_bins", "moe_intermediate_size", "embed_dim", "projection_dim", "num_experts_per_tok",
)
_POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions")
# Whole numbers >= 0 (0 experts means a dense layer in several MoE configs).
_COUNT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts")
# Finite and > 0.
_POSITIVE_FLOATS = ("rope_theta",)
# Finite and >= 0.
_EPSILONS = ("layer_norm_eps", "rms_norm_eps", "layer_norm_epsilon", "norm_eps")
# Probabilities in [0, 1].
_PROBABILITIES = ("attention_dropout", "hidden_dropout", "dropout", "attention_probs_dropout_prob",
                  "hidden_dropout_prob", "resid_pdrop", "embd_pdrop", "attn_pdrop", "activation_dropout")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    """A finite real number (not a bool, a string or NaN)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _refuse(where: str, name: str, value, need: str):
    raise MemgraphError(f"{where}: config field {name!r} is {value!r}; it {need}: fix the config")


def check_fields(values: dict, where: str) -> None:
    """Refuse the first bad field of one config's raw values (a config.json object, or a config's vars)."""
    get = values.get
    for names, what, limit, beyond in (
            (_LAYER_FIELDS, "counts layers", MAX_LAYERS,
             f"is more layers than memgraph traces ({MAX_LAYERS:,}; see memgraph/model_spec/config_checks.py)"),
            (_SIZE_FIELDS, "sizes a tensor", MAX_DIM, f"sizes a tensor beyond {MAX_DIM:,} (2**24), more than any GPU holds")):
        for name in names:
            value = get(name)
            if value is None:
                continue
            # a list gives one per stage (PVT, SegFormer: num_attention_heads [1, 2, 5, 8]): each is checked
            for item in (value if isinstance(value, (list, tuple)) and value else (value,)):
                if not _whole(item) or item < 1:
                    _refuse(where, name, value, f"{what} and must be a whole number >= 1")
                if item > limit:
                    _refuse(where, name, value, beyond)
    for name in _POSITION_FIELDS:
        value = get(name)
        if value is not None and (not _whole(value) or not 1 <= value <= MAX_DIM):
            _refuse(where, name, value, f"counts positions and must be a whole number from 1 to {MAX_DIM:,}")
    for name in _COUNT_FIELDS:
        value = get(name)
        if value is not None and (not _whole(value) or not 0 <= value <= MAX_DIM):
            _refuse(where, name, value, f"counts experts and must be a whole number from 0 to {MAX_DIM:,}")
    for names, ok, need in ((_POSITIVE_FLOATS, lambda v: v > 0, "must be a finite number > 0"),
                            (_EPSILONS, lambda v: v >= 0, "must be a finite number >= 0"),
                            (_PROBABILITIES, lambda v: 0 <= v <= 1, "is a probability and must be between 0 and 1")):
        for name in names:
            value = get(name)
            if value is not None and not (_number(value) and ok(value)):
                _refuse(where, name, value, need)
    rope = get("rope_parameters") or get("rope_scaling")
    if isinstance(rope, dict):  # transformers 5 keeps rope_theta here; per layer type in some models
        for params in (rope.values() if all(isinstance(v, dict) for v in rope.values()) and rope else (rope,)):
            for key, label in (("rope_theta", "rope_theta"), ("factor", "rope factor")):
                value = params.get(key)
                if value is not None and not (_number(value) and value > 0):
                    _refuse(where, label, value, "must be a finite number > 0")
    heads, kv = get("num_attention_heads"), get("num_key_value_heads")
    if _whole(heads) and _whole(kv) and heads % kv:
        _refuse(where, "num_key_value_heads", kv, f"must divide num_attention_heads ({heads}) for grouped-query attention")


def check_config(config, where: str) -> None:
    """Refuse the first bad field of ``config`` or of any sub-config (one line naming it). Run on the raw
    JSON as well (:func:`check_fields`), before transformers' own arithmetic on the values can fail."""
    seen, stack = set(), [(config, where)]
    while stack:
        cfg, here = stack.pop()
        if id(cfg) in seen:
            continue
        seen.add(id(cfg))
        check_fields(vars(cfg), here)
        for key, value in vars(cfg).items():
            if hasattr(value, "to_dict") and hasattr(value, "model_type"):  # a sub-config
                stack.append((value, f"{here} ({key})"))
