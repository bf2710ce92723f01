"""Which transformers models have a *learned* absolute position table, and the config field that sizes it.

Such a model cannot take a sequence longer than its table: the embedding lookup indexes past it (on a
GPU a device-side assert, on the CPU an IndexError), so memgraph refuses ``--seq-len`` beyond the limit
instead of predicting a step that cannot run. Rotary, ALiBi and relative-position models have no such
table and are not listed: their limit is a quality question, not a crash.

Derived from transformers 5.23's sources: the model types whose ``modeling_*.py`` builds
``nn.Embedding(config.max_position_embeddings | config.n_positions, ...)`` or a
``*LearnedPositionalEmbedding`` (``grep -lE "nn\\.Embedding\\(\\s*config\\.(max_position_embeddings|n_positions)"``
and ``grep -l LearnedPositionalEmbedding`` over transformers/models/*/modeling_*.py), restricted to the
text models memgraph's tasks feed token sequences to. OPT's and BART's learned tables have 2 extra rows
(``offset = 2``) that positions never reach beyond ``max_position_embeddings``, so the limit is that field.
DeBERTa(-v2) is listed only with ``position_biased_input`` (otherwise it adds no absolute positions).
RoBERTa-style models number positions from ``padding_idx + 1`` (``create_position_ids_from_input_ids`` in
modeling_roberta.py: ``cumsum(mask) * mask + padding_idx``), so the largest index is ``seq + pad_token_id``
and the longest sequence is ``max_position_embeddings - pad_token_id - 1`` (512 for roberta-base's 514).
"""

from __future__ import annotations

# model_type -> config field holding the number of learned positions
LEARNED_POSITION_FIELD = {
    **{t: "max_position_embeddings" for t in (
        "albert", "bert", "bert-generation", "big_bird", "convbert", "distilbert", "electra", "ernie",
        "flaubert", "layoutlm", "luke", "megatron-bert", "mobilebert", "nystromformer", "rembert", "roberta",
        "roberta-prelayernorm", "xlm-roberta", "xlm-roberta-xl", "roc_bert", "splinter", "squeezebert", "xlm",
        "yoso", "mra", "camembert", "data2vec-text", "gpt_neo", "gpt_bigcode", "bart", "mbart", "opt", "biogpt",
        "blenderbot", "blenderbot-small", "plbart", "mvp", "bigbird_pegasus", "led", "clip_text_model",
        "siglip_text_model", "siglip2_text_model", "deberta", "deberta-v2",
    )},
    "gpt2": "n_positions",
    "openai-gpt": "n_positions",
    "imagegpt": "n_positions",
}

# Types that number positions from padding_idx + 1 (the models defining create_position_ids_from_input_ids,
# restricted to the ones listed above).
PADDING_OFFSET_TYPES = frozenset({"roberta", "roberta-prelayernorm", "xlm-roberta", "xlm-roberta-xl", "camembert",
                                  "data2vec-text", "luke"})

# Types whose absolute table exists only when this config flag is true.
CONDITIONAL_FLAG = {"deberta": "position_biased_input", "deberta-v2": "position_biased_input"}


def learned_position_limit(config) -> tuple[int, str] | None:
    """(number of learned positions, config field) of ``config``'s model, or None if it has no such table."""
    model_type = getattr(config, "model_type", None)
    name = LEARNED_POSITION_FIELD.get(model_type)
    if name is None:
        return None
    flag = CONDITIONAL_FLAG.get(model_type)
    if flag is not None and not getattr(config, flag, False):
        return None
    if getattr(config, "position_embedding_type", "absolute") not in ("absolute", None):
        return None  # BERT-family configs may choose relative_key / relative_key_query instead
    limit = getattr(config, name, None)
    if not isinstance(limit, int) or limit <= 0:
        return None
    if model_type in PADDING_OFFSET_TYPES:
        limit -= (getattr(config, "pad_token_id", None) or 0) + 1
    return (limit, name) if limit > 0 else None
