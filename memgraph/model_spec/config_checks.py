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
_LAYER_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers",
                 "num_decoder_layers")
_SIZE_FIELDS = (
    "hidden_size", "n_embd", "d_model", "d_ff", "d_kv", "intermediate_size", "n_inner", "ffn_dim",
    "encoder_ffn_dim", "decoder_ffn_dim", "num_attention_heads", "n_head", "encoder_attention_heads",
    "decoder_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "patch_size", "num_channels",
    "num_mel_bins", "moe_intermediate_size", "embed_dim", "projection_dim", "num_experts_per_tok",
    "num_labels",
)
# Whole numbers >= 1, or one per stage (Swin, Hiera: "num_heads": [3, 6, 12, 24]).
_PER_STAGE_FIELDS = ("num_heads",)
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
    for name in _PER_STAGE_FIELDS:
        value = get(name)
        items = list(value) if isinstance(value, (list, tuple)) and value else [value]
        if value is not None and not all(_whole(v) and 1 <= v <= MAX_DIM for v in items):
            _refuse(where, name, value, f"counts attention heads and must be a whole number from 1 to {MAX_DIM:,} "
                                        "(or a list of them, one per stage)")
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


# Token ids that place or pad tokens in the inputs memgraph builds (the embedding's padding row, where image
# tokens go, the decoder's first token): each must index the vocabulary. transformers 5.23 only warns
# (PretrainedConfig.validate_token_ids, configuration_utils.py), so a LLaVA config whose image_token_index lies
# outside the vocabulary would trace with no image token placed. pad_token_id -1 is the Hub's "no padding
# token" (the same place in transformers names configs that store it), and nn.Embedding takes it.
TOKEN_ID_FIELDS = ("pad_token_id", "image_token_index", "image_token_id", "video_token_id", "audio_token_id",
                   "audio_token_index", "decoder_start_token_id")
NO_TOKEN = {"pad_token_id": -1}
# Embedding rows a model type holds beyond its config's vocab_size, so that token ids up to vocab_size + rows - 1
# are valid: MllamaTextModel embeds vocab_size + 8 rows (transformers 5.23 models/mllama/modeling_mllama.py,
# MllamaTextModel.__init__; the same in 5.6), and Llama 3.2 Vision's released config.json puts
# image_token_index 128256 (<|image|>) at vocab_size 128256, one of those rows.
EXTRA_EMBEDDING_ROWS = {"mllama": 8}


def check_token_ids(values: dict, where: str, vocab_size=None, model_type=None) -> None:
    """Refuse a token id of ``values`` (a raw config.json object) outside ``vocab_size`` (its own, else the given
    one: a multimodal config's text vocabulary), widened by the model type's ``EXTRA_EMBEDDING_ROWS`` (``model_type``
    where the caller has already taken it out of ``values``)."""
    own = values.get("vocab_size")
    text = values.get("text_config")
    vocab = own if _whole(own) else text.get("vocab_size") if isinstance(text, dict) else vocab_size
    if not _whole(vocab):
        return
    rows = EXTRA_EMBEDDING_ROWS.get(model_type or values.get("model_type"), 0)
    extra = f" + {rows} extra embedding rows" if rows else ""
    for name in TOKEN_ID_FIELDS:
        value = values.get(name)
        if value is None or (_whole(value) and (0 <= value < vocab + rows or value == NO_TOKEN.get(name))):
            continue
        _refuse(where, name, value, f"is a token id and must index the vocabulary: a whole number from 0 to "
                                    f"{vocab + rows - 1:,} (vocab_size {vocab:,}{extra})")


def check_architectures(value, where: str) -> str:
    """The model class a config.json's ``architectures`` names (its first item), or a one-line refusal."""
    if value is None or value == []:
        raise MemgraphError(f"config {where!r} names no 'architectures': add e.g. \"architectures\": [\"LlamaForCausalLM\"]")
    first = value[0] if isinstance(value, list) and value else None
    if not isinstance(first, str) or not first.isidentifier():
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise MemgraphError(f"{where}: config field 'architectures' is {shown}; it must be a list of model class "
                            "names, e.g. [\"LlamaForCausalLM\"]: fix the config")
    if first.startswith("Auto"):
        raise MemgraphError(f"{where}: config field 'architectures' names {first!r}, a transformers auto class, which "
                            "picks a class from model_type and is not one itself: name the model class, e.g. "
                            "LlamaForCausalLM")
    return first


def check_family(cls_name: str, model_type, where: str) -> None:
    """The class ``architectures`` names must be built from the config ``model_type`` makes (its
    ``config_class``): a MistralForCausalLM over a llama config reads fields a LlamaConfig lacks."""
    import transformers

    cls = getattr(transformers, cls_name, None)
    expected = getattr(getattr(cls, "config_class", None), "model_type", None)
    if expected and isinstance(model_type, str) and model_type != expected:
        raise MemgraphError(f"{where}: config field 'architectures' names {cls_name}, a {expected!r} model, but "
                            f"'model_type' is {model_type!r}: make them agree (model_type {expected!r}, or the "
                            f"{model_type} class)")


def check_field_names(values: dict, where: str) -> None:
    """Refuse a config.json key that would replace a method of transformers' config class (``"to_dict": 1``)."""
    import inspect

    from transformers import PretrainedConfig

    for key in values:
        attr = inspect.getattr_static(PretrainedConfig, key, None) if isinstance(key, str) else None
        if attr is None:
            continue
        read_only = isinstance(attr, property) and attr.fset is None
        if read_only or isinstance(attr, (classmethod, staticmethod)) or inspect.isfunction(attr):
            raise MemgraphError(f"{where}: config field {key!r} is the name of a method of transformers' "
                                "PretrainedConfig, not a setting: remove it from the config")


class HugeInteger(int):
    """Placeholder for a JSON integer literal longer than Python converts (4,300 digits, ``sys.int_info``)."""

    digits = 0


def parse_json_int(text: str):
    """``json.loads(parse_int=...)``: the integer, or a marker for a literal too long to be a config value."""
    if len(text) > 30:  # no config value needs more than 30 digits; longer ones may exceed int()'s limit
        marker = HugeInteger(0)
        marker.digits = len(text.lstrip("-"))
        return marker
    return int(text)


def check_huge_integers(data, where: str) -> None:
    """Refuse the first integer literal of more than 30 digits in a parsed config.json, naming its field."""
    stack = [("", data)]
    while stack:
        path, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            here = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
            if isinstance(value, HugeInteger):
                raise MemgraphError(f"{where}: config field {here!r} is an integer of {value.digits:,} digits, more "
                                    "than any config value needs: fix the config")
            stack.append((here, value))
