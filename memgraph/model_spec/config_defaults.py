"""Tensor-sizing fields a user's config.json leaves out, which transformers fills from its config class's
defaults without a word (``PretrainedConfig.__init__`` keeps each subclass's keyword default): one warning each,
for the report's ``warning:`` lines. A field may come under another name (``attribute_map``: GPT-2's ``n_embd``
is ``hidden_size``); either name counts as given. Zoo configs are published files and are not checked."""

from __future__ import annotations

# the fields that set tensor shapes (parameters, activations or both), under transformers' common names
SIZING_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "max_position_embeddings", "image_size", "patch_size", "num_local_experts",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "d_ff", "d_kv", "encoder_layers",
    "decoder_layers", "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
)


def defaulted_fields(data: dict, config) -> list[tuple[str, object]]:
    """(field, value) for each sizing field ``config`` has that ``data`` (the raw JSON) names under no alias."""
    aliases = dict(getattr(config, "attribute_map", {}) or {})
    out = []
    for name in SIZING_FIELDS:
        value = getattr(config, name, None) if name in aliases or name in vars(config) else None
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        names = {name, aliases.get(name)} | {k for k, v in aliases.items() if v == name}
        if not names & set(data):
            out.append((name, value))
    return out


def default_warnings(data: dict, config, where: str) -> list[str]:
    import transformers

    cls = type(config).__name__
    return [f"{where} has no {name!r}: transformers {transformers.__version__}'s {cls} fills in {value}; "
            "add it to the config if the model has another" for name, value in defaulted_fields(data, config)]
