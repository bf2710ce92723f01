"""Coverage sweep: every architecture of transformers' auto mappings, tiny, measured and analysed on the CPU.

``python tools/coverage.py [--tasks causal-lm,masked-lm,...] [--only PATTERN] [--out reports/coverage.md]``

For each task family (one transformers auto mapping each, :data:`TASK_MAPPINGS`) and each architecture in it,
the sweep builds a tiny config from the config class's defaults (:func:`tiny_config`: hidden size 32, 2 layers,
2 heads, vocabulary 256, sizes of experts, images and sub-configs shrunk alike; never downloaded), runs the
training step for real on the CPU (:func:`memgraph.measure`, the allocator's steady-state peak), analyses it for
the ``cpu`` target (:func:`memgraph.analyze`) and writes one row: runs for real / analyses / error %, or the
failing op or module with a one-line reason. ``reports/coverage.md`` and ``reports/coverage.json`` hold the
result; the shares that matter are over the architectures whose step runs for real.

Skipped with the reason: architectures whose model class is missing from this transformers build, those that
need an extra package (``requires_backends``) or remote code, and image-text or speech architectures whose config
no input recipe of memgraph takes (model_spec/multimodal_inputs.py: a fixed-size vision tower with an image token,
or a Qwen2-VL-style patch grid; model_spec/speech_inputs.py: a speech encoder-decoder with a feature extractor;
model_spec/audio_text_inputs.py: an audio-language model whose processor makes its audio inputs). Task
``audio-text-to-text`` is the audio-language classes among the multimodal-LM and seq2seq-LM mappings
(:data:`TASK_FILTERS`); a speech-seq2seq row of such a class runs that recipe too.

The tiny configs keep the architectures valid where the shrink alone would break them (:func:`_keep_valid`,
:func:`_shrink_mrope`, :func:`_every_kind`): GroupNorm groups, Swin windows, rotary sections, one layer of each
kind, special token ids below the shrunk vocabulary, LayerDrop off (its random layer skipping differs between
the real step and the trace).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__" and str(ROOT) not in sys.path:  # `python tools/coverage.py`: this checkout's memgraph
    sys.path.insert(0, str(ROOT))

from memgraph.trace.record import progress  # noqa: E402
from memgraph.watch import time_budget  # noqa: E402

TASK_MAPPINGS = {  # task family -> transformers.models.auto.modeling_auto mapping
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "speech-seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "image-text-to-text": "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    # the audio-language classes among the multimodal LMs (model_spec/audio_text_inputs.py is_audio_text_class_name)
    "audio-text-to-text": "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    # the video-taking classes among the image-text ones (model_spec/video_inputs.py is_video_class_name):
    # transformers 5.23 names no video-text-to-text mapping
    "video-text-to-text": "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
}
TASK_FILTERS = {"audio-text-to-text": "is_audio_text_class_name",  # task -> audio_text_inputs.py predicate
                "video-text-to-text": "memgraph.model_spec.video_inputs:is_video_class_name"}
# Audio Flamingo 3 and Music Flamingo are named only in the seq2seq-LM mapping
EXTRA_MAPPINGS = {"audio-text-to-text": ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",)}
# Task families whose inputs memgraph derives from the config only for some architectures: a row whose recipe
# refuses the config (model_spec/multimodal_inputs.py NoImageTextLayout, model_spec/speech_inputs.py
# NoSpeechLayout) is skipped with the recipe's reason.
RECIPE_TASKS = ("speech-seq2seq", "image-text-to-text", "audio-text-to-text", "video-text-to-text")
VIDEO_FRAMES = 4  # video rows: one video of 4 frames (InstructBLIP-Video's processor always inserts 4), 56 px for
# the grid models as their image rows, the tower's size for LLaVA-style ones, no image
# A sample for the test suite: one architecture per family, one of them a mixture of experts.
SAMPLE = {"causal-lm": ["mixtral"], "masked-lm": ["bert"], "seq2seq-lm": ["t5"],
          "sequence-classification": ["gpt2"], "image-classification": ["convnext"], "speech-seq2seq": ["whisper"],
          "audio-text-to-text": ["qwen2_audio"]}

TOLERANCE = 0.01  # 1% of the real CPU peak: the cpu target is exact on dense models, the rest is allocator rounding
SEQ_LEN, IMAGE_SIZE, BATCH = 16, 32, 1
# Image classification takes 2 images: a CNN brings a 32-px image down to 1x1 before its last BatchNorm, which in
# training refuses one value per channel (torch/nn/functional.py _verify_batch_size: "Expected more than 1 value
# per channel when training"); two images give it two.
IMAGE_BATCH = 2
IMAGE_TEXT_SEQ_LEN = 64  # room for one image's tokens (16 for 32-px images of 8-px patches) and the text around
PER_MODEL_SECONDS = 90
AUDIO_SECONDS = 1.0

# -- tiny configs -------------------------------------------------------------------------------------
HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, LAYERS = 32, 2, 1, 64, 256, 2
_SIZES = {
    # width
    "hidden_size": HIDDEN, "d_model": HIDDEN, "n_embd": HIDDEN, "embed_dim": HIDDEN, "dim": HIDDEN,
    "embedding_size": HIDDEN, "word_embed_proj_dim": HIDDEN, "projection_dim": HIDDEN,
    # depth
    "num_hidden_layers": LAYERS, "n_layer": LAYERS, "n_layers": LAYERS, "num_layers": LAYERS,
    "encoder_layers": LAYERS, "decoder_layers": LAYERS, "num_decoder_layers": LAYERS, "num_encoder_layers": LAYERS,
    # heads
    "num_attention_heads": HEADS, "n_head": HEADS, "n_heads": HEADS, "encoder_attention_heads": HEADS,
    "decoder_attention_heads": HEADS, "num_heads": HEADS,
    # feed-forward
    "intermediate_size": FFN, "ffn_dim": FFN, "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN, "n_inner": FFN,
    "d_ff": FFN, "moe_intermediate_size": FFN // 2, "shared_expert_intermediate_size": FFN // 2,
    "expert_intermediate_size": FFN // 2,
    # experts
    "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "moe_topk": 2, "top_k": 2,
    # sparse-attention indexers (DeepSeek-V3.2-style DSA: GLM-5, Mistral Large 4)
    "index_n_heads": HEADS, "index_head_dim": HIDDEN // HEADS,
    # multi-head latent attention (DeepSeek)
    "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    # state-space models
    "state_size": 8, "time_step_rank": 4, "ssm_state_size": 8, "mamba_d_state": 8, "d_state": 8,
    # per-layer input embeddings (Gemma 3n / Gemma 4: a [vocab_size_per_layer_input, layers x 256] table, 134 M
    # values at the class defaults' 262144 rows)
    "vocab_size_per_layer_input": VOCAB,
    # vision towers that name their depth so (Qwen2-VL and its successors: configuration_qwen2_vl.py ``depth``)
    "depth": LAYERS,
    # images
    "image_size": IMAGE_SIZE,
    # perceiver resamplers (Idefics 2: 64 latents per image, each an image token in the prompt)
    "resampler_n_latents": 8,
    # image-to-text resampler latents (Kosmos-2: 64, kept; Kosmos-2.5: 2048, each an image token in the prompt)
    "latent_query_num": 64,
}
_SMALLER_ONLY = {"resampler_n_latents", "latent_query_num", "vocab_size_per_layer_input", "num_experts_per_tok", "moe_topk", "top_k", "n_shared_experts", "image_size", "num_experts",
                 "num_local_experts", "n_routed_experts"}


def _shrink(cfg, depth: int = 0) -> None:
    """Shrink ``cfg`` (a PretrainedConfig) and its sub-configs in place."""
    from transformers import PretrainedConfig

    per_layer = _per_layer_overrides(cfg)  # heterogeneous configs: read before the shrink, re-applied after it
    before = {k: getattr(cfg, k, None) for k in ("num_hidden_layers", "n_layer", "num_layers")}
    old_layers = next((v for v in before.values() if isinstance(v, int)), None)
    aliases = getattr(cfg, "attribute_map", {}) or {}
    for key, value in _SIZES.items():
        if aliases.get(key, key) != key and aliases[key] not in _SIZES:
            continue  # an alias of another quantity (ConvNeXt: num_hidden_layers -> num_stages)
        cur = getattr(cfg, key, None)
        if isinstance(cur, int) and not isinstance(cur, bool) and cur > 0:
            if key in _SMALLER_ONLY and cur <= value:
                continue
            try:
                setattr(cfg, key, value)
            except Exception:
                pass
    kv = getattr(cfg, "num_key_value_heads", None)
    if isinstance(kv, int) and kv > 0:
        # multi-head latent attention expands its latent into a key per head: released MLA configs name as many
        # key/value heads as heads (DeepSeek-V3 128/128, Mistral Large 4), and Mistral Large 4's attention repeats
        # the expanded keys by heads // key-value heads (modeling_mistral_large4.py num_key_value_groups)
        mla = isinstance(getattr(cfg, "kv_lora_rank", None), int) and isinstance(getattr(cfg, "num_attention_heads", None), int)
        cfg.num_key_value_heads = cfg.num_attention_heads if mla else KV_HEADS
    if "head_dim" in vars(cfg) and cfg.head_dim is None and isinstance(getattr(cfg, "num_attention_heads", None), int):
        # HunYuan-VL's attention reads ``getattr(config, "head_dim", hidden // heads)`` (modeling_hunyuan_vl.py), the
        # class default None included: the value the others derive from None
        cfg.head_dim = HIDDEN // HEADS
    if isinstance(getattr(cfg, "head_dim", None), int):
        # multi-head latent attention rotates qk_rope_head_dim channels: DeepSeek-V3's config sets head_dim to it
        # (configuration_deepseek_v3.py ``self.head_dim = self.qk_rope_head_dim``), which its rotary embedding reads
        rope = getattr(cfg, "qk_rope_head_dim", None)
        cfg.head_dim = rope if isinstance(rope, int) and getattr(cfg, "head_dim") == getattr(type(cfg), "qk_rope_head_dim", None) \
            else HIDDEN // HEADS
    for key in ("hidden_sizes", "depths", "num_heads", "num_attention_heads", "embed_dims", "layer_types",
                "block_types", "mlp_layer_types", "mlp_only_layers", "kv_source_layers"):
        cur = getattr(cfg, key, None)
        if isinstance(cur, (list, tuple)) and cur:
            try:
                if key == "hidden_sizes" or key == "embed_dims":
                    setattr(cfg, key, [min(int(v), 16 * 2 ** i) for i, v in enumerate(cur)])
                elif key == "depths":
                    setattr(cfg, key, [1 for _ in cur])
                elif key in ("num_heads", "num_attention_heads"):
                    setattr(cfg, key, [min(int(v), 2) for v in cur])
                elif old_layers and len(cur) == old_layers:
                    setattr(cfg, key, _every_kind(list(cur), LAYERS) if key in ("layer_types", "block_types", "mlp_layer_types")
                            else list(cur[:LAYERS]))
            except Exception:
                pass
    pyramid = [getattr(cfg, k, None) for k in ("patch_sizes", "hidden_sizes", "depths")]
    if old_layers and all(isinstance(v, (list, tuple)) and len(v) == old_layers for v in pyramid):
        # a pyramid whose layer count is its stages' (Muse Spark's audio encoder: configuration_muse_spark.py
        # validate_architecture wants one patch size, width and depth per layer): every stage kept, each tiny
        cfg.num_hidden_layers = old_layers
    if isinstance(getattr(cfg, "patch_size", None), int) and cfg.patch_size > 8 and getattr(cfg, "image_size", None):
        cfg.patch_size = 8
    pair = getattr(cfg, "image_size", None)
    if isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(v, int) and v > IMAGE_SIZE for v in pair):
        cfg.image_size = type(pair)([IMAGE_SIZE, IMAGE_SIZE])  # InternVL's (448, 448)
        patch = getattr(cfg, "patch_size", None)
        if isinstance(patch, (list, tuple)) and len(patch) == 2 and all(isinstance(v, int) and v > 8 for v in patch):
            cfg.patch_size = type(patch)([8, 8])
    _keep_valid(cfg)
    for key, value in list(vars(cfg).items()):
        if key.endswith("layerdrop") and isinstance(value, float) and value > 0:
            # LayerDrop skips each layer in training when torch.rand says so (SeamlessM4T's
            # speech_encoder_layerdrop 0.1): which layers run, hence the peak, would differ between the real step
            # and the trace by chance; both run every layer with it at 0
            setattr(cfg, key, 0.0)
    _shrink_vocab(cfg)
    _shrink_mrope(cfg)
    if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "decoder_start_token_id", None) is None:
        cfg.decoder_start_token_id = getattr(cfg, "pad_token_id", None) or 0  # T5's convention: the pad token
    if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "pad_token_id", -1) is None:
        cfg.pad_token_id = cfg.decoder_start_token_id  # shift_tokens_right needs one (Moonshine's config has none)
    _shrink_layer_lists(cfg)
    if per_layer is not None:
        _reapply_per_layer(cfg, *per_layer)
    for key, value in list(vars(cfg).items()):
        if isinstance(value, PretrainedConfig) and depth < 3:
            _shrink(value, depth + 1)
    if depth == 0 and hasattr(cfg, "get_text_config"):
        text = cfg.get_text_config()
        if text is not cfg and isinstance(getattr(text, "vocab_size", None), int):
            _remap_tokens(cfg, text.vocab_size, (text,))  # LLaVA's image_token_id 32000 beside a shrunk text vocab
        vision = getattr(cfg, "vision_config", None)
        if isinstance(getattr(vision, "out_hidden_size", None), int) and isinstance(getattr(text, "hidden_size", None), int):
            vision.out_hidden_size = text.hidden_size  # the vision merger's output feeds the text model (GLM-4V)
        side = [getattr(vision, k, None) for k in ("image_size", "patch_size")]
        tokens = getattr(cfg, "mm_tokens_per_image", None)
        if all(isinstance(v, int) for v in side) and isinstance(tokens, int) and tokens > (side[0] // side[1]) ** 2:
            # Gemma 3 average-pools the patch grid to sqrt(mm_tokens_per_image) per side (modeling_gemma3.py
            # Gemma3MultiModalProjector: kernel = patches_per_side // tokens_per_side), which must stay >= 1
            cfg.mm_tokens_per_image = (side[0] // side[1]) ** 2
        _shrink_pinpoints(cfg, vision)
        qformer = getattr(cfg, "qformer_config", None)
        if isinstance(getattr(qformer, "encoder_hidden_size", None), int) and isinstance(getattr(vision, "hidden_size", None), int):
            qformer.encoder_hidden_size = vision.hidden_size  # the Q-Former cross-attends to the vision tower's output
        _shrink_feature_layers(cfg, vision)


def _per_layer_overrides(cfg):
    """A heterogeneous config's per-layer values (transformers 5.23 integrations/heterogeneity: Gemma 4's
    full-attention layers take ``head_dim`` 512 beside the global 256; reading such an attribute globally raises
    AmbiguousGlobalPerLayerAttributeError): (the overrides per layer, the layer types, the global values), read
    through the public ``per_layer_config`` / ``per_layer_attributes``; global access then allowed for the shrink.
    None for a homogeneous config (and on transformers without heterogeneous configs)."""
    if not getattr(cfg, "is_heterogeneous", False):
        return None
    attrs = sorted(cfg.per_layer_attributes or ())
    layers = [cfg.per_layer_config[i] for i in range(cfg.num_hidden_layers)]
    cfg.allow_global_per_layer_attribute_access = True
    glob = {a: getattr(cfg, a, None) for a in attrs}
    overrides = [{a: getattr(layer, a) for a in attrs if getattr(layer, a) != glob[a]} for layer in layers]
    return overrides, list(getattr(cfg, "layer_types", None) or []), glob


def _reapply_per_layer(cfg, overrides: list, old_types: list, glob: dict) -> None:
    """The per-layer overrides on the shrunk layers: each new layer takes those of the first old layer of its
    type (Gemma 4: the full-attention layers'), a larger ``head_dim`` scaled with the global one (512 / 256 x the
    tiny 16 = 32), any other attribute the shrunk global value (so the tiny model keeps the heterogeneous head
    size and drops the rest)."""
    types = list(getattr(cfg, "layer_types", None) or [])
    new = {}
    for i in range(cfg.num_hidden_layers):
        src = old_types.index(types[i]) if types and old_types and types[i] in old_types else i
        over = {}
        for key, value in (overrides[src] if src < len(overrides) else {}).items():
            if key == "head_dim" and isinstance(value, int) and isinstance(glob.get(key), int) and glob[key]:
                over[key] = max(1, cfg.head_dim * value // glob[key])
        if over:
            new[i] = over
    cfg.allow_global_per_layer_attribute_access = False
    cfg.per_layer_config = new or None


def _shrink_pinpoints(cfg, vision) -> None:
    """Any-resolution grids (LLaVA-NeXT's ``image_grid_pinpoints``, multiples of its 336-px tile; OneVision's of
    384) kept in tiles of the shrunk tower: each pinpoint divided by their common unit (the gcd) times the tiny
    ``image_size``, and only the pinpoints of at most 2x2 tiles kept (a tiny step, the same grid rule)."""
    pinpoints = getattr(cfg, "image_grid_pinpoints", None)
    size = getattr(vision, "image_size", None)
    if not isinstance(pinpoints, list) or not pinpoints or not isinstance(size, int):
        return
    unit = math.gcd(*(int(v) for p in pinpoints for v in p))
    scaled = [[int(v) // unit * size for v in p] for p in pinpoints]
    cfg.image_grid_pinpoints = [p for p in scaled if p[0] * p[1] <= 4 * size * size] or scaled[:1]


def _shrink_layer_lists(cfg) -> None:
    """Per-layer index lists kept inside the shrunk depth (Mllama: the vision tower's ``intermediate_layers_indices``
    [3, 7, 15, 23, 30], each one's hidden state concatenated into ``vision_output_dim`` = hidden x (5 + 1), and
    the text model's ``cross_attention_layers`` [3, 8, ..., 38]; its ``num_global_layers`` 8)."""
    layers = getattr(cfg, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return
    chosen = getattr(cfg, "intermediate_layers_indices", None)
    if isinstance(chosen, list) and chosen:
        cfg.intermediate_layers_indices = [min(int(v), layers - 1) for v in chosen]
        if isinstance(getattr(cfg, "vision_output_dim", None), int):
            cfg.vision_output_dim = cfg.hidden_size * (len(chosen) + 1)
    cross = getattr(cfg, "cross_attention_layers", None)
    if isinstance(cross, list) and cross:
        cfg.cross_attention_layers = sorted({min(int(v), layers - 1) for v in cross})
    glob = getattr(cfg, "global_attn_indexes", None)
    if isinstance(glob, (list, tuple)) and glob:
        # SAM's global-attention layers [2, 5, 8, 11]; DeepSeek-VL-Hybrid reads the first one's hidden state
        # (modeling_deepseek_vl_hybrid.py ``global_attn_indexes[0]``)
        cfg.global_attn_indexes = type(glob)(sorted({min(int(v), layers - 1) for v in glob}))
    if isinstance(getattr(cfg, "num_global_layers", None), int):
        cfg.num_global_layers = min(cfg.num_global_layers, LAYERS)


def _shrink_feature_layers(cfg, vision) -> None:
    """Feature layers past the shrunk tower's depth (VipLLaVA's ``vision_feature_layers`` [-2, -5, -8, -11, 6]
    index ``hidden_states``, layers + 1 entries): each folded into range, order kept."""
    layers = getattr(vision, "num_hidden_layers", None)
    chosen = getattr(cfg, "vision_feature_layers", None)
    if not isinstance(layers, int) or not isinstance(chosen, (list, tuple)):
        return
    cfg.vision_feature_layers = type(chosen)(max(-(layers + 1), min(layers, int(v))) for v in chosen)


QWEN2VL_MROPE_DEFAULT = (16, 24, 24)  # modeling_qwen2_vl.py: rope_parameters.get("mrope_section", [16, 24, 24])


# text configs that name no mrope_section while their model reads a default of its own: Qwen2-VL's
# (modeling_paddleocr_vl.py: ``config.rope_parameters.get("mrope_section", [16, 24, 24])``), Ernie 4.5 VL's
# (modeling_ernie4_5_vl_moe.py Ernie4_5_VLMoeTextRotaryEmbedding: ``.get("mrope_section", [22, 22, 20])``; its
# ``recomposition_frequencies`` stacks the first two sections, h and w, so they must stay equal)
MROPE_DEFAULT_READERS = {"paddleocr_vl_text": QWEN2VL_MROPE_DEFAULT, "ernie4_5_vl_moe_text": (22, 22, 20)}


def _shrink_mrope(cfg) -> None:
    """Multimodal rotary sections (Qwen2-VL's ``mrope_section`` [16, 24, 24]: temporal, height, width) must sum
    to half the head dim (modeling_qwen2_vl.py apply_multimodal_rotary_pos_emb splits cos/sin by them, twice):
    scaled to the tiny head dim, proportions kept."""
    head_dim = getattr(cfg, "head_dim", None) or (HIDDEN // HEADS)
    for key in ("rope_parameters", "rope_scaling"):
        rope = getattr(cfg, key, None)
        sections = rope.get("mrope_section") if isinstance(rope, dict) else None
        own = MROPE_DEFAULT_READERS.get(getattr(cfg, "model_type", None))
        if sections is None and isinstance(rope, dict) and (own or "mrope_section" in getattr(cfg, "ignore_keys_at_rope_validation", ())):
            sections = list(own or QWEN2VL_MROPE_DEFAULT)  # the model's default when the config has none
        # the rotated part of the head only: GLM-4.5V rotates head_dim * partial_rotary_factor channels
        # (modeling_glm4v_moe.py Glm4vMoeTextRotaryEmbedding: ``dim = int(head_dim * partial_rotary_factor)``)
        factor = rope.get("partial_rotary_factor", 1.0) if isinstance(rope, dict) else 1.0
        half = int(head_dim * factor) // 2
        if not isinstance(sections, list) or not sections or sum(sections) == half:
            continue
        total = sum(sections)
        new = [max(1, v * half // total) for v in sections]
        new[-1] += half - sum(new)
        rope["mrope_section"] = new


GROUP_NORM_GROUPS = 4  # the tiny widths (16 * 2**i, bottlenecks of a quarter) are multiples of 4


def _keep_valid(cfg) -> None:
    """Constraints the shrunk sizes must still meet, generically by attribute name:

    - ``num_groups`` (GroupNorm groups, BiT's 32): every tiny width must divide into them (torch GroupNorm:
      "num_channels must be divisible by num_groups"), so at most :data:`GROUP_NORM_GROUPS`, a divisor of the old;
    - ``window_size`` of hierarchical windowed attention (Swin: patches merged 2x2 after every stage of
      ``depths``): the bias table is built for ``window_size**2`` positions, while a stage smaller than the
      window attends over the whole stage (modeling_swin.py ``set_shift_and_window_size``), so the window must
      not exceed the last stage's side: ``image_size / patch_size / 2**(stages - 1)``.
    """
    groups = getattr(cfg, "num_groups", None)
    if isinstance(groups, int) and not isinstance(groups, bool) and groups > GROUP_NORM_GROUPS:
        cfg.num_groups = math.gcd(groups, GROUP_NORM_GROUPS)
    window, image, patch, depths = (getattr(cfg, k, None) for k in ("window_size", "image_size", "patch_size", "depths"))
    if all(isinstance(v, int) for v in (window, image, patch)) and isinstance(depths, (list, tuple)) and depths:
        last = max(1, image // patch >> (len(depths) - 1))
        if window > last:
            cfg.window_size = last


def _every_kind(types: list, n: int) -> list:
    """The first ``n`` layer types, each kind of the full list kept where ``n`` allows: Qwen3.5's three linear-
    attention layers per full-attention one would otherwise shrink to linear attention only, and its cache
    (cache_utils.py ``get_seq_length``) needs an attention layer."""
    out = types[:n]
    for kind in dict.fromkeys(types):
        if kind in out:
            continue
        dup = next((i for i in range(len(out) - 1, -1, -1) if out.count(out[i]) > 1), None)
        if dup is None:
            break
        out[dup] = kind
    attention = next((k for k in types if k in ATTENTION_KINDS), None)
    if attention is not None and not any(k in ATTENTION_KINDS for k in out) and out:
        # every kind did not fit (Nemotron-H: linear attention, MoE, full attention, MLP in 2 layers): its cache
        # (cache_utils.py get_seq_length, transformers 5.23) still needs an attention layer, so the last one is one
        out[-1] = attention
    return out


ATTENTION_KINDS = ("full_attention", "attention", "sliding_attention")  # layer-type names of softmax attention


def _shrink_vocab(cfg) -> None:
    vocab = getattr(cfg, "vocab_size", None)
    if not isinstance(vocab, int) or vocab <= VOCAB:
        return
    cfg.vocab_size = VOCAB
    _remap_tokens(cfg, VOCAB)


def _remap_tokens(cfg, vocab: int, others=()) -> None:
    """Special token ids of ``cfg`` at or past ``vocab`` moved to the top of the vocabulary, distinct ones (also
    distinct from the ids of the configs in ``others``: Mllama's text BOS and its image token); Molmo 2 names its
    image token ``image_patch_id`` (configuration_molmo2.py attribute_map: image_token_id -> image_patch_id)."""
    used = set()
    for key, value in [kv for c in (cfg, *others) for kv in vars(c).items()]:
        if key.endswith(("token_id", "token_index", "token_ids", "image_patch_id")):
            used.update(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, int))
    taken = vocab - 1
    while taken in used:
        taken -= 1
    for key, value in list(vars(cfg).items()):
        if not key.endswith(("token_id", "token_index", "token_ids", "image_patch_id")):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
            setattr(cfg, key, taken)
            taken -= 1
            while taken in used:
                taken -= 1
        elif isinstance(value, list) and any(isinstance(v, int) and v >= vocab for v in value):
            new = []
            for v in value:
                if isinstance(v, int) and v >= vocab:
                    new.append(taken)
                    taken -= 1
                    while taken in used:
                        taken -= 1
                else:
                    new.append(v)
            setattr(cfg, key, new)


# Text configs whose rotary embedding reads one rope dict per layer type (modeling_cohere_compass.py
# CohereCompassRotaryEmbedding: ``config.rope_parameters[layer_type]``, with ``rope_theta`` and an interleaved
# ``mrope_section``, default [24, 20, 20]); the class default (``{}``) builds no model, the released checkpoint
# (CohereLabs/North-Micro-Vision-Instruct) names one per layer type: here each the default rope, sections scaled
PER_LAYER_TYPE_ROPE = {"cohere_compass_text": (24, 20, 20)}
DEFAULT_ROPE_THETA = 10000.0  # transformers modeling_rope_utils.py: the default rope's base where a config names none


def _per_layer_type_rope(cfg) -> None:
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    sections = PER_LAYER_TYPE_ROPE.get(getattr(text, "model_type", None))
    rope = getattr(text, "rope_parameters", None)
    if sections is None or not isinstance(rope, dict) or set(text.layer_types) <= set(rope):
        return
    theta = rope.get("rope_theta", DEFAULT_ROPE_THETA)
    text.rope_parameters = {t: {"rope_type": "default", "rope_theta": theta, "mrope_section": list(sections)}
                            for t in dict.fromkeys(text.layer_types)}
    for t in text.rope_parameters:  # _shrink_mrope on each: the sections sum to half the tiny head dim
        one = type("C", (), {"head_dim": text.head_dim, "rope_parameters": text.rope_parameters[t]})()
        _shrink_mrope(one)


def _patch_to_query(cfg) -> None:
    """Aria's projector looks its query count up by the patches of an image (modeling_aria.py AriaProjector:
    ``patch_to_query_dict[num_patches]``; the class default {1225: 128, 4900: 256}: 490- and 980-px images of
    14-px patches); the tiny tower's image: its patch count, with the first entry's patches per query kept
    (1225 / 128 = 9.6: 16 patches -> round(16 * 128 / 1225) = 2 queries)."""
    table = getattr(cfg, "projector_patch_to_query_dict", None)
    v = getattr(cfg, "vision_config", None)
    if not isinstance(table, dict) or not table or v is None:
        return
    patches = (v.image_size // v.patch_size) ** 2
    first = min(table)
    cfg.projector_patch_to_query_dict = {patches: max(1, round(patches * table[first] / first))}
    cfg.max_value_projector_patch_to_query_dict = max(cfg.projector_patch_to_query_dict.values())


# Text configs whose attention projects queries by Linear(hidden, hidden) but splits heads of d_kv
# (modeling_pix2struct.py Pix2StructTextAttention: ``self.query = nn.Linear(self.hidden_size, self.hidden_size)``,
# ``view(..., -1, self.key_value_proj_dim)``): their released configs keep hidden = heads * d_kv (768 = 12 * 64)
HIDDEN_IS_HEADS_TIMES_DKV = frozenset({"pix2struct_text_model"})


def _head_width(cfg) -> None:
    for sub in (getattr(cfg, "text_config", None),):
        if getattr(sub, "model_type", None) in HIDDEN_IS_HEADS_TIMES_DKV:
            sub.d_kv = sub.hidden_size // sub.num_heads
    _partial_rope_width(getattr(cfg, "text_config", None))


def _partial_rope_width(text) -> None:
    """dots.3-note's MLA attention rotates ``qk_rope_head_dim`` channels with a rope of ``head_dim *
    partial_rotary_factor`` (released: 256 * 0.25 = 64 = qk_rope_head_dim, configuration_dots3_note.py); the shrink
    leaves 16 * 0.25 = 4 against 8, so the tiny head_dim is qk_rope_head_dim / factor again."""
    rope = getattr(text, "rope_parameters", None)
    if not isinstance(rope, dict) or not isinstance(getattr(text, "qk_rope_head_dim", None), int):
        return
    factors = {p.get("partial_rotary_factor") for p in rope.values() if isinstance(p, dict)}
    if len(factors) == 1 and isinstance(f := factors.pop(), float) and 0 < f < 1:
        text.head_dim = int(text.qk_rope_head_dim / f)


def tiny_config(model_type: str, with_vision: bool = False):
    """The config class's defaults for ``model_type``, shrunk (see :data:`_SIZES`); never downloaded.
    ``with_vision``: an optional vision sub-config the defaults leave out (Gemma 4: ``SubConfigSpec(...,
    optional=True)``, None by default; its released checkpoints carry one) is filled with its class's defaults, as
    the config's own docstring example builds it (``Gemma4Config(text_config, vision_config, audio_config)``)."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type)
    vision_class = (getattr(cfg, "sub_configs", None) or {}).get("vision_config")
    if with_vision and getattr(cfg, "vision_config", 0) is None and vision_class is not None:
        cfg.vision_config = vision_class()
    _query_image_token(cfg)
    _navit_tokens(cfg)
    _voxtral_audio_token(cfg)
    _radio_tokens(cfg)
    _omni_vision_tokens(cfg)
    _shrink(cfg)
    _per_layer_type_rope(cfg)
    _patch_to_query(cfg)
    _head_width(cfg)
    _audio_output_width(cfg)
    _cross_attention_width(cfg)
    _projector_widths(cfg)
    _radio_patch_widths(cfg)
    _dense_then_sparse(cfg)
    _encoder_pooling(cfg)
    _diarization_width(cfg)
    _moonshine_streaming_kv_heads(cfg)
    _speech_encoder_decoder_tokens(cfg)
    _speech_projector_width(cfg)
    _codec_upsample_groups(cfg)
    _dia_cross_attention(cfg)
    _diffusion_latent(cfg)
    _qsa_indexer(cfg)
    _deepstack_projectors(cfg)
    _unused_sliding_window(cfg)
    _vq_vocabulary(cfg)
    return cfg


def _projector_widths(cfg) -> None:
    """Projector widths that released configs tie to the vision or text width, which the shrink changes (transformers
    5.23; of its configs with a vision config, only these name the fields):

    - Muse Glimmer / Muse Spark ``out_hidden_size``: "output dimension of the vision encoder after patch merging"
      (configuration_muse_glimmer.py), the vision width times ``merge_size ** 2``;
    - Hunyuan-VL, Inkling, Inkling 2 ``vision_config.text_hidden_size``: the text width (configuration_inkling2.py
      checks ``vision_config.text_hidden_size == text_config.hidden_size``);
    - Kimi K2.5 ``projection_hidden_size`` (1152, the vision width): its projector's ``pre_norm`` is a
      ``LayerNorm(projection_hidden_size)`` over the vision tower's output (modeling_kimi_k25.py
      ``Kimi_K25MultimodalProjection``);
    - PP-FormulaNet ``vision_config.decoder_hidden_size``: the text decoder's width;
    - dots.3-note ``vision_config.adapter_in_dim`` / ``adapter_out_dim`` (and the audio adapter's): vision / text."""
    vision, text = getattr(cfg, "vision_config", None), getattr(cfg, "text_config", None)
    if vision is None:
        return
    merge = getattr(vision, "merge_size", None)
    if isinstance(getattr(cfg, "out_hidden_size", None), int) and isinstance(merge, int):
        cfg.out_hidden_size = vision.hidden_size * merge * merge
    if text is not None and isinstance(getattr(vision, "text_hidden_size", None), int):
        vision.text_hidden_size = text.hidden_size
    if text is not None and isinstance(getattr(vision, "decoder_hidden_size", None), int):
        # PP-FormulaNet: the vision tower's last Linear maps to ``decoder_hidden_size``, the text decoder's d_model,
        # whose cross-attention reads it (modeling_pp_formulanet.py ``linear_2``, 512 both by default)
        vision.decoder_hidden_size = text.hidden_size
    if text is not None and isinstance(getattr(cfg, "merged_hidden_size", None), int):
        # MiniMax-M3-VL derives it in __post_init__ (configuration_minimax_m3_vl.py: text hidden x merge^2), before
        # the shrink; its projector width (6144) shrunk too
        cfg.merged_hidden_size = text.hidden_size * vision.spatial_merge_size ** 2
        if isinstance(getattr(cfg, "projector_hidden_size", None), int):
            cfg.projector_hidden_size = HIDDEN
    adapter = getattr(cfg, "adapter_config", None)
    chosen = getattr(adapter, "vision_feature_layer", None)
    if isinstance(chosen, list) and isinstance(getattr(vision, "num_hidden_layers", None), int):
        # Molmo 2's adapter pools ViT layers [24, 18], which must index the shrunk tower (configuration_molmo2.py
        # validate_architecture); folded into range, order kept; its text width is the text model's
        n = vision.num_hidden_layers
        adapter.vision_feature_layer = [max(-n, min(n - 1, int(v))) for v in chosen]
        if text is not None and isinstance(getattr(adapter, "text_hidden_size", None), int):
            adapter.text_hidden_size = text.hidden_size
    ratio = getattr(vision, "pixel_shuffle_ratio", None)
    if isinstance(ratio, float) and isinstance(getattr(vision, "projector_input_dim", None), int):
        # Llama 4: the pixel shuffle turns hidden_size channels into hidden / ratio^2, which the projector MLP's
        # fc1 reads as intermediate_size (modeling_llama4.py Llama4VisionMLP2); its output (projector_output_dim)
        # is what the multimodal projector reads as vision_output_dim (the released Scout config: 1408 x 4 = 5632,
        # 4096 / 4096 / 4096; the class defaults, 768 / 5632 / 7680, do not fit together)
        vision.intermediate_size = int(vision.hidden_size / ratio ** 2)
        vision.projector_input_dim = vision.projector_output_dim = vision.vision_output_dim = vision.hidden_size
    if isinstance(getattr(cfg, "projection_hidden_size", None), int):
        cfg.projection_hidden_size = vision.hidden_size
    if isinstance(getattr(vision, "adapter_in_dim", None), int) and text is not None:
        # dots.3-note: the vision merger reads the tower's width and writes the text width, and the audio adapter
        # too (configuration_dots3_note.py validate_architecture: "adapter_in_dim must match hidden_size",
        # "vision_config.adapter_out_dim" / "audio_config.adapter_out_dim" against text_config.hidden_size)
        vision.adapter_in_dim, vision.adapter_out_dim = vision.hidden_size, text.hidden_size
        audio = getattr(cfg, "audio_config", None)
        if isinstance(getattr(audio, "adapter_out_dim", None), int):  # and its input, the audio encoder's width
            audio.adapter_input_size, audio.adapter_out_dim = audio.hidden_size, text.hidden_size


def _encoder_pooling(cfg) -> None:
    """T5Gemma 2 keeps Gemma 3's vision tower and pooling projector in its encoder config: the same cap on
    ``mm_tokens_per_image`` as Gemma 3's (``_shrink``), read there, and the image token id of the top level (no
    parameter's shape depends on either, so its text-only rows are unchanged)."""
    enc = getattr(cfg, "encoder", None)
    vision = getattr(enc, "vision_config", None)
    side = [getattr(vision, k, None) for k in ("image_size", "patch_size")]
    tokens = getattr(enc, "mm_tokens_per_image", None)
    if all(isinstance(v, int) for v in side) and isinstance(tokens, int) and tokens > (side[0] // side[1]) ** 2:
        enc.mm_tokens_per_image = (side[0] // side[1]) ** 2
    if isinstance(getattr(enc, "image_token_index", None), int) and isinstance(getattr(cfg, "image_token_index", None), int):
        # the encoder reads its own image_token_index (256001 by default, as the top level's before _remap_tokens
        # moved that one into the tiny vocabulary): the same id
        enc.image_token_index = cfg.image_token_index


def _cross_attention_width(cfg) -> None:
    """BLIP's text decoder cross-attends to the image features through ``Linear(encoder_hidden_size, ...)``
    (modeling_blip_text.py ``BlipTextSelfAttention``: ``nn.Linear(config.encoder_hidden_size, self.all_head_size)``
    for cross-attention); released BLIP configs set it to the vision width (768), which the shrink changes: the tiny
    text config takes the tiny vision width. (Of the configs of transformers 5.23, only BLIP's text config with a
    vision config names encoder_hidden_size.)"""
    text, vision = getattr(cfg, "text_config", None), getattr(cfg, "vision_config", None)
    if text is not None and vision is not None and isinstance(getattr(text, "encoder_hidden_size", None), int):
        text.encoder_hidden_size = vision.hidden_size


def _diarization_width(cfg) -> None:
    """Nemotron 3 diarization (the speaker model inside Nemotron 3.5 Transcribe's audio config) projects its audio
    encoder's output through ``Linear(head_config.audio_hidden_size, ...)`` (modeling_nemotron3_diarization.py), and
    its config requires ``head_config.audio_hidden_size == audio_config.hidden_size`` (configuration_nemotron3_
    diarization.py ``validate_architecture``, transformers 5.23): the shrink changed the one, so the other follows."""
    for c in (cfg, *(v for v in vars(cfg).values() if hasattr(v, "to_dict"))):
        for d in (c, *(v for v in vars(c).values() if hasattr(v, "to_dict"))):
            head, audio = getattr(d, "head_config", None), getattr(d, "audio_config", None)
            if isinstance(getattr(head, "audio_hidden_size", None), int) and isinstance(getattr(audio, "hidden_size", None), int):
                head.audio_hidden_size = audio.hidden_size


def _moonshine_streaming_kv_heads(cfg) -> None:
    """MoonshineStreamingDecoderLayer reads ``config.num_key_value_heads`` (modeling_moonshine_streaming.py,
    transformers 5.23), which MoonshineStreamingConfig does not define (its encoder config does: 8, its
    num_attention_heads): the class defaults cannot build the model. The decoder gets as many key/value heads as
    attention heads, as its encoder's defaults have."""
    if cfg.model_type == "moonshine_streaming" and getattr(cfg, "num_key_value_heads", None) is None:
        cfg.num_key_value_heads = cfg.num_attention_heads


def _speech_projector_width(cfg) -> None:
    """Granite Speech's Q-Former projector cross-attends to its speech encoder's output (modeling_granite_speech.py
    ``GraniteSpeechEncoderProjector``: the Blip-2 Q-Former's ``encoder_hidden_size`` wide keys), but the class
    defaults disagree (encoder ``hidden_dim`` 1024, Blip2QFormerConfig ``encoder_hidden_size`` 1408, transformers
    5.23), and the model runs only where they agree: the tiny config sets the projector's to the encoder's width."""
    enc, proj = getattr(cfg, "encoder_config", None), getattr(cfg, "projector_config", None)
    if isinstance(getattr(enc, "hidden_dim", None), int) and isinstance(getattr(proj, "encoder_hidden_size", None), int):
        # the encoder's width is hidden_dim (its hidden_size only an alias), which the shrink leaves at 1024: tiny too
        enc.hidden_dim = HIDDEN
        enc.dim_head = HIDDEN // enc.num_heads
        proj.encoder_hidden_size = enc.hidden_dim


def _codec_upsample_groups(cfg) -> None:
    """Mimi's decoder upsamples depthwise: ``ConvTranspose1d(hidden_size, hidden_size, groups=upsample_groups)``
    (modeling_mimi.py, MimiConfig defaults hidden_size 512 = upsample_groups 512, transformers 5.23); the shrink
    narrows hidden_size, so the groups follow (Kyutai speech-to-text's codec_config)."""
    for c in (cfg, getattr(cfg, "codec_config", None)):
        if getattr(c, "model_type", None) == "mimi" and isinstance(getattr(c, "upsample_groups", None), int):
            c.upsample_groups = c.hidden_size


def _diffusion_latent(cfg) -> None:
    """VibeVoice's diffusion head denoises the acoustic tokenizer's latents: ``noisy_images_proj`` is
    ``Linear(latent_size, hidden_size)`` (modeling_vibevoice.py ``VibeVoiceDiffusionHead``; defaults latent_size 64
    = VibeVoiceAcousticTokenizerConfig hidden_size 64, transformers 5.23): the latent follows the shrunk tokenizer."""
    head, audio = getattr(cfg, "diffusion_head_config", None), getattr(cfg, "audio_config", None)
    if cfg.model_type == "vibevoice" and head is not None and audio is not None:
        head.latent_size = audio.hidden_size


def _dia_cross_attention(cfg) -> None:
    """Dia's decoder cross-attends to the encoder through ``Linear(cross_hidden_size, cross heads * cross_head_dim)``
    (modeling_dia.py ``DiaCrossAttention``; DiaDecoderConfig defaults cross_hidden_size 1024 = DiaEncoderConfig's
    hidden_size 1024, 16 heads of 128, transformers 5.23): the cross-attention follows the shrunk encoder."""
    dec, enc = getattr(cfg, "decoder_config", None), getattr(cfg, "encoder_config", None)
    if cfg.model_type == "dia" and dec is not None and enc is not None:
        dec.cross_hidden_size = enc.hidden_size
        dec.cross_num_attention_heads = dec.cross_num_key_value_heads = enc.num_attention_heads
        dec.cross_head_dim = enc.head_dim


# SpeechEncoderDecoderModel's docs (speech-encoder-decoder.md, transformers 5.23) set the composite config's
# ``decoder_start_token_id`` to the decoder tokenizer's [CLS] and ``pad_token_id`` to its [PAD] before training:
# bert-base-uncased's are 101 and 0 (the default decoder is BERT); without them the loss cannot shift its labels
BERT_CLS, BERT_PAD = 101, 0


def _speech_encoder_decoder_tokens(cfg) -> None:
    if cfg.model_type == "speech-encoder-decoder":
        enc = cfg.encoder  # wav2vec2's convolutional feature encoder: 7 layers of 512 channels, tiny too
        if isinstance(getattr(enc, "conv_dim", None), (list, tuple)):
            enc.conv_dim = [HIDDEN] * len(enc.conv_dim)
        if getattr(cfg, "decoder_start_token_id", None) is None:
            cfg.decoder_start_token_id = BERT_CLS
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = BERT_PAD


# VoxtralProcessor.__init__ (processing_voxtral.py, transformers 5.23) sets ``audio_token_id = 24``, the id the
# released Voxtral configs carry; the config class defaults it to None
VOXTRAL_AUDIO_TOKEN = 24


def _voxtral_audio_token(cfg) -> None:
    if cfg.model_type == "voxtral" and getattr(cfg, "audio_token_id", None) is None:
        cfg.audio_token_id = VOXTRAL_AUDIO_TOKEN


# Qwen tokenizer ids of <|vision_start|> / <|vision_end|>, as the released Qwen2.5-Omni thinker_config carries them;
# the omni thinkers' get_rope_index reads config.vision_start_token_id, which their config classes do not define
OMNI_VISION_START, OMNI_VISION_END = 151652, 151653


def _omni_vision_tokens(cfg) -> None:
    if str(cfg.model_type).endswith("_omni_thinker") or cfg.model_type == "qwen3_omni_moe_thinker":
        for key, value in (("vision_start_token_id", OMNI_VISION_START), ("vision_end_token_id", OMNI_VISION_END)):
            if getattr(cfg, key, None) is None:
                setattr(cfg, key, value)  # mapped into the tiny vocabulary by _remap_tokens


def _audio_output_width(cfg) -> None:
    """An audio encoder whose ``output_dim``-wide features are scattered into the text embeddings (Qwen3-ASR's
    ``proj2``, modeling_qwen3_asr.py ``get_placeholder_mask`` checks the sizes) must give the text hidden size; the
    class defaults (3584 and 2048) do not, so the tiny config sets it to the tiny text width."""
    audio, text = getattr(cfg, "audio_config", None), getattr(cfg, "text_config", None)
    if audio is not None and text is not None and isinstance(getattr(audio, "output_dim", None), int):
        audio.output_dim = text.hidden_size
    if audio is not None and text is not None and isinstance(getattr(audio, "out_hidden_size", None), int):
        # Muse Spark: "Width the final projection maps to, i.e. the text model's hidden size"
        # (configuration_muse_spark.py MuseSparkAudioConfig)
        audio.out_hidden_size = text.hidden_size


def _dense_then_sparse(cfg) -> None:
    """DeepSeek-OCR 2's text config class leaves ``mlp_layer_types`` None (a model built from the defaults fails on
    ``config.mlp_layer_types[layer_idx]``; released configs list them); the tiny config takes one dense layer, then
    sparse ones, so both MLP kinds run, with 2 experts a token (``num_experts_per_tok``, None too). Its (and
    Unlimited OCR's) SAM neck's widths (``output_channels`` 256, ``downsample_channels``
    [512, 896], the last the Qwen2 encoder's width, modeling_deepseek_ocr2.py) shrink to the tiny widths."""
    text = getattr(cfg, "text_config", None)
    if hasattr(text, "mlp_layer_types") and text.mlp_layer_types is None and isinstance(text.num_hidden_layers, int):
        text.mlp_layer_types = ["dense"] + ["sparse"] * (text.num_hidden_layers - 1)
        if getattr(text, "num_experts_per_tok", 0) is None:  # also None by default: 2 of the tiny routed experts
            text.num_experts_per_tok = 2
    vision = getattr(cfg, "vision_config", None)
    sam, encoder = getattr(vision, "sam_config", None), getattr(vision, "encoder_config", None)
    if isinstance(getattr(sam, "downsample_channels", None), (list, tuple)) and encoder is not None:
        sam.output_channels = sam.hidden_size
        sam.downsample_channels = [sam.hidden_size, encoder.hidden_size]


def _radio_tokens(cfg) -> None:
    """Nemotron-H Omni's config class leaves its image / video token ids None (the released config names them): ids
    past any vocabulary here, mapped to unused tiny ids by :func:`_remap_tokens`."""
    if getattr(getattr(cfg, "vision_config", None), "model_type", None) == "radio":
        for key, value in (("image_token_id", 2 ** 30), ("video_token_id", 2 ** 30 + 1)):
            if getattr(cfg, key, 0) is None:
                setattr(cfg, key, value)


def _radio_patch_widths(cfg) -> None:
    """Nemotron-H Omni's RADIO tower reads patches of ``patch_dim`` = C * p * p values (768 for 16-px patches) and
    video tubelets of ``video_patch_dim`` = 2 * C * p * p (configuration_radio.py), which the shrunk patch size
    changes; ``vision_hidden_size`` (the projector's input, 1280) is the shrunk tower's width."""
    vision = getattr(cfg, "vision_config", None)
    if getattr(vision, "model_type", None) != "radio":
        return
    c, p = vision.num_channels, vision.patch_size
    vision.patch_dim, vision.video_patch_dim = c * p * p, vision.video_temporal_patch_size * c * p * p
    cfg.vision_hidden_size = vision.hidden_size


def _query_image_token(cfg) -> None:
    """Q-Former models (BLIP-2, InstructBLIP: ``num_query_tokens``) scatter their query outputs into the text at an
    ``<image>`` token that their processor adds to the tokenizer (``num_query_tokens`` of them per image); the
    config class defaults ``image_token_index`` to None (released checkpoints set it to the added token's id,
    past the text vocabulary): given an id past any vocabulary here, which :func:`_remap_tokens` then maps to an
    unused id of the tiny one."""
    if isinstance(getattr(cfg, "num_query_tokens", None), int):
        for key in ("image_token_index", "video_token_index"):  # InstructBLIP-Video's <video> token
            if getattr(cfg, key, 0) is None:
                setattr(cfg, key, 2 ** 30)


# Qwen4-Exp's QSA indexer (configuration_qwen4_exp.py, transformers 5.23): the class leaves its five fields None,
# while its "indexed_attention" layers (every 4th by default) build the indexer and compute budget // compress_ratio;
# validate_architecture asks for kv heads 1, budget a multiple of the ratio and a head at least the rotary width.
QSA_INDEXER = {"indexer_n_heads": HEADS, "indexer_kv_heads": 1, "indexer_budget": 8, "indexer_compress_ratio": 4}


def _qsa_indexer(cfg) -> None:
    """Qwen4-Exp: the indexer fields a tiny step needs (:data:`QSA_INDEXER`, head width the tiny head dim)."""
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if "indexed_attention" in (getattr(text, "layer_types", None) or ()) and hasattr(text, "indexer_budget") \
            and text.indexer_budget is None:
        for key, value in {**QSA_INDEXER, "indexer_head_dim": text.head_dim}.items():
            setattr(text, key, value)


# Granite 4 Vision (configuration_granite4_vision.py, transformers 5.23) leaves deepstack_layer_map and
# downsample_rate None; released granite-vision-4.1 configs set deepstack_layer_map [[-19, 9], [-13, 6], [-7, 3],
# [-1, 0]] (vision layer, LLM layer), downsample_rate "4/8" (a 4x4 query per 8x8 window of patches) and
# spatial_target_layers [12, 15, 18, 21] (the class default too). The tiny step keeps four deepstack and four spatial
# projectors, their layers folded into the tiny towers (vision layer -1 or -2, LLM layer index mod LAYERS), and the
# rate's 1/2 with a 2x2 query per 4x4 window: a tiny tower's image is 4x4 patches (32 px / 8 px), no 8x8 window.
# Its __post_init__ gives the window Q-Former vision_config.hidden_size // 64 heads (18 for SigLIP's 1152), none for
# the tiny 32: the tiny vision tower is 64 wide (one Q-Former head), as the config rebuilds it on every load.
QFORMER_HEAD_WIDTH = 64
DEEPSTACK_LAYER_MAP = [(-19, 9), (-13, 6), (-7, 3), (-1, 0)]
TINY_DOWNSAMPLE_RATE = "2/4"


def _deepstack_projectors(cfg) -> None:
    """Granite 4 Vision: the deepstack map and downsample rate of a released checkpoint, folded into the tiny model."""
    if not (hasattr(cfg, "deepstack_layer_map") and cfg.deepstack_layer_map is None):
        return
    text_layers = cfg.text_config.num_hidden_layers
    cfg.deepstack_layer_map = [(-1 - (v != -1), l % text_layers) for v, l in DEEPSTACK_LAYER_MAP]
    cfg.spatial_target_layers = [l % text_layers for l in cfg.spatial_target_layers]
    cfg.downsample_rate = TINY_DOWNSAMPLE_RATE
    cfg.vision_config.hidden_size = QFORMER_HEAD_WIDTH
    q = cfg.qformer_config  # as Granite4VisionConfig.__post_init__ sets it
    q.hidden_size = q.encoder_hidden_size = QFORMER_HEAD_WIDTH
    q.num_attention_heads = QFORMER_HEAD_WIDTH // 64


# Step3p7's text model builds a sliding-window mask on every forward (modeling_step3p7.py Step3p7TextModel:
# ``create_sliding_window_causal_mask``, which raises without ``sliding_window``), while the class leaves the window
# None and every layer "full_attention" (configuration_step3p7.py, transformers 5.23): a window for that unused mask.
UNUSED_SLIDING_WINDOW = 512


def _unused_sliding_window(cfg) -> None:
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if getattr(cfg, "model_type", None) == "step3p7" and text.sliding_window is None \
            and "sliding_attention" not in text.layer_types:
        text.sliding_window = UNUSED_SLIDING_WINDOW


# Chameleon's and Emu3's configs take the checkpoint's vocabulary_map (every token's name and id; None by default): the tiny
# config gets a laid-out one (model_spec/vq_tokens.py) for a tiny codebook that fits the tiny vocabulary
TINY_CODEBOOK = 64
TINY_VQ_BASE_CHANNELS = 32


def _vq_vocabulary(cfg) -> None:
    from memgraph.model_spec.vq_tokens import is_vq_tokens, synthetic_vocabulary_map

    if is_vq_tokens(cfg) and cfg.vocabulary_map is None:
        vq = cfg.vq_config  # Chameleon's codebook is num_embeddings, Emu3's codebook_size
        setattr(vq, "codebook_size" if hasattr(vq, "codebook_size") else "num_embeddings", TINY_CODEBOOK)
        cfg.vocabulary_map = synthetic_vocabulary_map(TINY_CODEBOOK, cfg.get_text_config().vocab_size, cfg.model_type)
        cfg.image_token_id = cfg.vocabulary_map["<image>"]
        if hasattr(vq, "codebook_size"):
            # Emu3's VQ attention runs on the last level's channels, base_channels * channel_multiplier[-1]
            # (1024 = 256 * 4 in the class defaults, its hidden_size too): the shrunk hidden size with base channels
            # to match (GroupNorm's 32 groups need every level's channels a multiple of 32)
            vq.base_channels = TINY_VQ_BASE_CHANNELS
            vq.hidden_size = TINY_VQ_BASE_CHANNELS * vq.channel_multiplier[-1]


def _navit_tokens(cfg) -> None:
    """MiniCPM-V 4.6 / 4.7 and MiniCPM-OCR leave image_token_id and video_token_id None (configuration_minicpmv4_6.py,
    transformers 5.23; the released checkpoints set the tokenizer's ids): ids past any vocabulary here, which
    :func:`_remap_tokens` maps to unused ids of the tiny one."""
    if getattr(cfg, "downsample_mode", None) is not None and hasattr(cfg, "image_token_id"):
        for offset, key in enumerate(("image_token_id", "video_token_id")):
            if getattr(cfg, key, 0) is None:
                setattr(cfg, key, 2 ** 30 + offset)


# -- one architecture -----------------------------------------------------------------------------------
@dataclass
class Row:
    task: str
    model_type: str
    model_class: str
    status: str  # "ok", "analyze-failed", "real-failed", "skipped"
    runs_for_real: bool = False
    analyzes: bool = False
    measured: int | None = None
    predicted: int | None = None
    error_pct: float | None = None
    reason: str = ""
    seconds: float = 0.0
    unknown_ops: dict = field(default_factory=dict)
    run: int = 0  # index of the sweep run that made this row (the report's "runs" list: when, what, versions)

    @property
    def within(self) -> bool:
        return self.error_pct is not None and abs(self.error_pct) <= 100 * TOLERANCE


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".replace("\n", " ").replace("|", "/")
    return text[:220]


def _spec_and_options(task: str, model_type: str, class_name: str):
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.model_spec.sources import ModelSpec

    video = task == "video-text-to-text"
    if video:
        task = "image-text-to-text"
    cfg = tiny_config(model_type, with_vision=task == "image-text-to-text")
    kw = dict(batch_size=BATCH, seq_len=SEQ_LEN, target="cpu", optimizer="adamw")
    mtask = {"sequence-classification": "custom-named"}.get(task, task)
    if task == "speech-seq2seq":  # audio-language models among the speech classes: their own recipe
        from memgraph.model_spec.audio_text_inputs import is_audio_text_class_name

        if is_audio_text_class_name(class_name):
            task = mtask = "audio-text-to-text"
    if task == "image-classification":
        kw.update(image_size=getattr(cfg, "image_size", IMAGE_SIZE) or IMAGE_SIZE, seq_len=None, batch_size=IMAGE_BATCH)
    elif task == "sequence-classification":
        vocab = getattr(cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg, "vocab_size", VOCAB)
        kw["inputs"] = (f"input_ids=int64[{BATCH},{SEQ_LEN}]<{vocab}", f"labels=int64[{BATCH}]<{cfg.num_labels}")
        mtask = "causal-lm"  # a transformers head: inputs by name (options.inputs), loss from the head
    elif task == "speech-seq2seq":
        # Whisper takes exactly its padded 30 s (2 frames per encoder position); the others 1 s (speech_inputs.py)
        # Pop2Piano's beat tracker needs 4 s (model_spec/speech_inputs.py BEAT_SECONDS)
        seconds = (2 * cfg.max_source_positions / 100 if model_type == "whisper" else
                   4.0 if model_type == "pop2piano" else 1.0)
        kw.update(audio_seconds=seconds, seq_len=None, target_len=8)
    elif task == "image-text-to-text":
        from memgraph.model_spec.multimodal_inputs import layout_of

        # a grid (Qwen2-VL-style) model has no native size: 56 px is the smallest side its processor makes
        # (min_pixels 56*56, smart_resize), a 4x4 grid of 14-px patches, 4 visual tokens after the 2x2 merge
        from memgraph.model_spec.image_tokens import processor_size

        layout = layout_of(cfg)  # a video model (InstructBLIP-Video) takes its one video, no image; Mistral 4 and Evolla none
        kw.update(seq_len=IMAGE_TEXT_SEQ_LEN, images=None if layout in ("query-video", "text-only", "protein") else 1,
                  image_size=56 if layout in ("grid", "soft", "flattened", "merge-sizes", "patch-tokens", "patch-budget") else None)
        if layout == "navit":  # MiniCPM-V: one 32-px view of the tiny tower's patches (navit_slices.py)
            kw["image_size"] = 32
        if layout == "naflex":  # LFM2-VL: the smallest view its processor makes (64 tokens), then the usual text
            from memgraph.model_spec.multimodal_inputs import smart_resize
            from memgraph.model_spec.naflex_tiles import single_view

            kw["image_size"] = 256
            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + single_view(cfg, 256, 256, smart_resize)[2]
        if processor_size(cfg):  # Florence-2: its processor's size is a setting; 64 px keeps the tiny step small
            kw["image_size"] = 64
            from memgraph.model_spec.vq_tokens import resizes_by_pixels

            if resizes_by_pixels(cfg):  # Emu3 resizes into [512^2, 1024^2] pixels: a 64-px budget keeps it 64 px
                from memgraph.model_spec.vq_tokens import vq_tokens_per_image

                kw["min_pixels"] = 64 * 64  # its 8 x (8 + 1) = 72 image tokens, then the usual text
                kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + vq_tokens_per_image(cfg, 64, 64)
        if layout == "soft":  # Gemma 4 resizes a 56-px image up into its patch budget: its soft tokens, then text
            from memgraph.model_spec.soft_token_patches import soft_tokens

            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + soft_tokens(cfg, 56, 56)
        if layout == "global-view":  # DeepSeek-OCR 2: its 144 queries and the view separator, then the text
            from memgraph.model_spec.image_tokens import image_tokens_per_image

            s = cfg.vision_config.sam_config.image_size
            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + image_tokens_per_image(cfg, 3, s, s).tokens
        if layout == "patch-budget":  # Nemotron-H Omni scales a 56-px image up to min_num_patches (1024): 256 tokens
            from memgraph.model_spec.patch_budget_inputs import TAG_TOKENS, image_grid

            gh, gw = image_grid(cfg, 56, 56)
            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + gh * gw // 4 + TAG_TOKENS
        if layout == "overlap-crops":  # Molmo 2: an image of one crop, its view and one crop (their tokens), then text
            from memgraph.model_spec.overlap_crops import crop_patches, image_layout, image_text_tokens

            side = crop_patches(cfg) * cfg.vision_config.patch_size
            kw["image_size"] = side
            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + image_text_tokens(image_layout(cfg, side, side)[2])
        if layout in ("prefix", "flattened") and isinstance(getattr(cfg, "latent_query_num", None), int):  # Kosmos-2(.5)
            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + cfg.latent_query_num
        if layout == "query-video":  # 4 frames x num_query_tokens video tokens, then the usual text
            from memgraph.model_spec.multimodal_inputs import QUERY_VIDEO_FRAMES

            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + QUERY_VIDEO_FRAMES * cfg.num_query_tokens
        if video:
            kw.update(video_frames=VIDEO_FRAMES, images=None)
            kw["seq_len"] = IMAGE_TEXT_SEQ_LEN + _video_tokens(cfg, layout)
    elif task == "audio-text-to-text":  # 1 s of audio: its audio tokens (the processor's count) and the text
        from memgraph.model_spec.audio_text_inputs import NoAudioTextLayout, audio_clip

        try:
            tokens = audio_clip(cfg, AUDIO_SECONDS).tokens
        except NoAudioTextLayout:  # the row's reason comes from _no_recipe
            tokens = 0
        kw.update(audio_seconds=AUDIO_SECONDS, seq_len=tokens + SEQ_LEN)
    spec = ModelSpec(name=f"{model_type} ({class_name})", source="config", task=mtask, config=cfg,
                     model_class=class_name)
    return spec, TrainingOptions(**kw)


def _video_tokens(cfg, layout) -> int:
    """The tokens of a video row's one video (the recipe's own count), 0 where the recipe takes no video."""
    from memgraph.model_spec.multimodal_inputs import QUERY_VIDEO_FRAMES, image_hw, qwen2_vl_video_grid, vision_of
    from memgraph.model_spec.video_inputs import takes_video, video_tokens

    try:
        if layout == "grid":
            return qwen2_vl_video_grid(cfg, 56, VIDEO_FRAMES)[3]
        if layout == "soft":  # Gemma 4: each frame in the video processor's budget, a timestamp beside it
            from memgraph.model_spec.soft_token_patches import VIDEO_MAX_SOFT_TOKENS, soft_tokens

            return VIDEO_FRAMES * (soft_tokens(cfg, 56, 56, VIDEO_MAX_SOFT_TOKENS) + 3)
        if layout == "query-video":
            return QUERY_VIDEO_FRAMES * cfg.num_query_tokens
        if layout == "patch-budget":  # Nemotron-H Omni: tubelets of 2 frames, <img> and </img> around each
            from memgraph.model_spec.patch_budget_inputs import TAG_TOKENS, frame_grid

            ph, pw = frame_grid(cfg, 56, 56)
            tubelets = -(-VIDEO_FRAMES // cfg.video_temporal_patch_size)
            return tubelets * (ph * pw // 4 + TAG_TOKENS)
        if layout == "merge-sizes":  # VideoLLaMA 3: a timestamp and each frame's merged patches
            from memgraph.model_spec.merge_size_inputs import TIMESTAMP_TOKENS, VIDEO_MERGE, video_grid
            from memgraph.model_spec.multimodal_inputs import smart_resize

            vh, vw = video_grid(cfg, (56, 56), VIDEO_FRAMES, smart_resize)
            return VIDEO_FRAMES * (TIMESTAMP_TOKENS + vh * vw // VIDEO_MERGE ** 2)
        if layout == "overlap-crops":  # Molmo 2: a timestamp, <frame_start>, the frame's pooled patches, <frame_end>
            from memgraph.model_spec.overlap_crops import TIMESTAMP_TOKENS, video_frame_tokens

            return VIDEO_FRAMES * (TIMESTAMP_TOKENS + video_frame_tokens(cfg) + 2)
        if layout == "fixed" and takes_video(cfg):
            vision = vision_of(cfg)
            return video_tokens(cfg, VIDEO_FRAMES, getattr(vision, "num_channels", None) or 3,
                                *image_hw(vision.image_size))
    except Exception:  # the row's reason comes from the recipe
        return 0
    return 0


def _no_recipe(spec, opts) -> str:
    """The recipe's reason when memgraph has no input layout for this config, else ''."""
    import torch

    from memgraph.model_spec.audio_text_inputs import NoAudioTextLayout
    from memgraph.model_spec.multimodal_inputs import NoImageTextLayout
    from memgraph.model_spec.speech_inputs import NoSpeechLayout

    try:
        spec.batch(opts, torch.float32)
    except (NoImageTextLayout, NoSpeechLayout, NoAudioTextLayout) as e:
        return "no input recipe: " + _one_line(e).split(": ", 1)[1]
    except Exception:
        return ""  # another refusal: the real run reports it
    return ""


def run_one(task: str, model_type: str, class_name: str) -> Row:
    """Measure and analyse one architecture (errors become the row's reason)."""
    import transformers

    from memgraph import api

    row = Row(task, model_type, class_name, "skipped")
    if getattr(transformers, class_name, None) is None:
        row.reason = f"transformers {transformers.__version__} has no class {class_name} (extra package needed?)"
        return row
    start = time.perf_counter()
    try:
        with time_budget(PER_MODEL_SECONDS):  # a runaway architecture ends as a row, not a hung sweep
            try:
                spec, opts = _spec_and_options(task, model_type, class_name)
            except Exception as e:
                row.reason = "config: " + _one_line(e)
                return row
            if task in RECIPE_TASKS:
                reason = _no_recipe(spec, opts)
                if reason:
                    row.reason = reason
                    return row
            from memgraph.measure import run_measurement

            try:
                progress.stage(f"{model_type}: the step run for real on the CPU")  # what a timeout names
                record = run_measurement(spec, opts, "cpu")
                row.measured = max(it["peak_allocated"] for it in record["iterations"][1:])
                row.runs_for_real = True
            except Exception as e:  # AnalysisTimeout (--timeout's, watch.py) included
                row.status, row.reason = "real-failed", upstream_bug(task, model_type, e) + "real run: " + _one_line(e)
            try:
                spec, opts = _spec_and_options(task, model_type, class_name)
                result = api.analyze_spec(spec, opts)[0]
                row.analyzes = True
                row.predicted = result.steady_state_peak.bytes
                row.unknown_ops = dict(result.ops.get("unknown", {}))
            except Exception as e:  # AnalysisTimeout (--timeout's, watch.py) included
                if row.runs_for_real:
                    row.status, row.reason = "analyze-failed", _one_line(e)
                return row
            if row.runs_for_real:
                row.status = "ok"
                row.error_pct = 100 * (row.predicted - row.measured) / row.measured
            return row
    finally:
        row.seconds = round(time.perf_counter() - start, 2)


def architectures(tasks: list[str], only: str | None) -> list[tuple[str, str, str]]:
    """(task, model type, class) to sweep, taken from the task families in turn (round robin), so that a sweep
    stopped early has covered every family alike."""
    from transformers.models.auto import modeling_auto

    per_task = []
    for task in tasks:
        mapping = dict(getattr(modeling_auto, TASK_MAPPINGS[task]))
        for extra in EXTRA_MAPPINGS.get(task, ()):
            mapping = {**getattr(modeling_auto, extra), **mapping}
        rows = []
        for model_type, class_name in sorted(mapping.items()) if task in EXTRA_MAPPINGS else mapping.items():
            if isinstance(class_name, (list, tuple)):
                class_name = class_name[0]
            if only and not any(fnmatch.fnmatch(model_type, p.strip()) for p in only.split(",")):
                continue
            if task in TASK_FILTERS:
                import importlib

                module, _, name = TASK_FILTERS[task].rpartition(":")
                if not getattr(importlib.import_module(module or "memgraph.model_spec.audio_text_inputs"),
                               name)(class_name):
                    continue
            rows.append((task, model_type, class_name))
        per_task.append(rows)
    out = []
    for i in range(max((len(r) for r in per_task), default=0)):
        out.extend(rows[i] for rows in per_task if i < len(rows))
    return out


# -- report ----------------------------------------------------------------------------------------------
def shares(rows: list[Row]) -> dict:
    """Per task: architectures tried, that run for real, and of those the share that analyse / within 1%."""
    out = {}
    for task in dict.fromkeys(r.task for r in rows):
        rs = [r for r in rows if r.task == task]
        real = [r for r in rs if r.runs_for_real]
        analyzed = [r for r in real if r.analyzes]
        within = [r for r in real if r.within]
        out[task] = {"architectures": len(rs), "skipped": sum(r.status == "skipped" for r in rs),
                     "runs_for_real": len(real), "analyze": len(analyzed), "within_1pct": len(within),
                     "analyze_share": len(analyzed) / len(real) if real else math.nan,
                     "within_share": len(within) / len(real) if real else math.nan}
    return out


def run_info(what: str, seconds: float) -> dict:
    """Provenance of one sweep run: when (UTC), what was run, the versions and the memgraph commit."""
    import subprocess

    import torch
    import transformers

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "what": what, "seconds": round(seconds, 1),
            "torch": torch.__version__, "transformers": transformers.__version__, "commit": commit or "unknown"}


def render_markdown(rows: list[Row], seconds: float, total: int | None = None, runs: list[dict] | None = None) -> str:
    import torch
    import transformers

    lines = ["# Architecture coverage", "",
             f"`python tools/coverage.py` on torch {torch.__version__}, transformers {transformers.__version__}: "
             f"every architecture of transformers' auto mappings, built tiny from its config class's defaults "
             f"(hidden {HIDDEN}, {LAYERS} layers, {HEADS} heads, vocabulary {VOCAB}, batch {BATCH}, {SEQ_LEN} tokens, "
             f"{IMAGE_SIZE}-px images (batch {IMAGE_BATCH} for image classification; image-text models: {IMAGE_TEXT_SEQ_LEN} "
             f"tokens, one image, 56 px for patch-grid models and Gemma 4 (whose 256 soft tokens come beside the 64); speech: 1 s of audio, 30 s for Whisper, 4 s for Pop2Piano, 8 target "
             f"tokens; audio-text models: {AUDIO_SECONDS:g} s of audio, its audio tokens and {SEQ_LEN} text tokens; "
             f"video-text models: one {VIDEO_FRAMES}-frame video, no image, its tokens beside the {IMAGE_TEXT_SEQ_LEN}), AdamW), run for real on the CPU (`memgraph measure --device cpu`, steady-state "
             f"peak) and analysed for the `cpu` target. Within: |error| <= {100 * TOLERANCE:g}% of the real peak. "
             f"Sweep time {seconds / 60:.1f} min.", ""]
    if runs and len(runs) > 1:
        lines += ["Rows come from more than one run (the `run` column of the last table names each row's run; "
                  "`--update` replaces the rows it re-runs):", "",
                  "| run | when | what | rows | torch | transformers | memgraph commit |", "|---|---|---|---|---|---|---|"]
        for i, r in enumerate(runs):
            n = sum(row.run == i for row in rows)
            lines.append(f"| {i} | {r['when']} | {r['what']} | {n} | {r['torch']} | {r['transformers']} | "
                         f"{r['commit']} |")
        lines.append("")
    elif runs:
        r = runs[0]
        lines += [f"One run: {r['what']}, {r['when']}, memgraph commit {r['commit']}.", ""]
    if total is not None and len(rows) < total:
        lines += [f"**Partial sweep: {len(rows)} of {total} architecture/task pairs** (taken round robin over the "
                  "task families; the sweep was stopped by its time budget).", ""]
    lines += [
             "## Shares (of the architectures whose step runs for real)", "",
             "| task | architectures | skipped | run for real | analyse | within 1% |", "|---|---|---|---|---|---|"]
    total = {"architectures": 0, "skipped": 0, "runs_for_real": 0, "analyze": 0, "within_1pct": 0}
    for task, s in shares(rows).items():
        for k in total:
            total[k] += s[k]
        lines.append(f"| {task} | {s['architectures']} | {s['skipped']} | {s['runs_for_real']} | "
                     f"{s['analyze']} ({_pct(s['analyze_share'])}) | {s['within_1pct']} ({_pct(s['within_share'])}) |")
    real = total["runs_for_real"] or 1
    lines.append(f"| **all** | {total['architectures']} | {total['skipped']} | {total['runs_for_real']} | "
                 f"{total['analyze']} ({_pct(total['analyze'] / real)}) | "
                 f"{total['within_1pct']} ({_pct(total['within_1pct'] / real)}) |")
    lines += ["", "## Runs for real but analysis fails or misses by more than 1%", "",
              "| task | architecture | measured | predicted | error | reason |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r.runs_for_real and not r.within:
            lines.append(f"| {r.task} | {r.model_type} | {r.measured} | {r.predicted or ''} | "
                         f"{'' if r.error_pct is None else f'{r.error_pct:+.2f}%'} | "
                         f"{KNOWN_MISSES.get(r.model_type) or r.reason} |")
    lines += ["", "## Every architecture", "",
              "| task | architecture | class | real | analyse | error | unknown ops | reason | run |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = "" if r.error_pct is None else f"{r.error_pct:+.3f}%"
        unknown = ", ".join(f"{k} x{v}" for k, v in sorted(r.unknown_ops.items()))
        lines.append(f"| {r.task} | {r.model_type} | {r.model_class} | {'yes' if r.runs_for_real else 'no'} | "
                     f"{'yes' if r.analyzes else 'no'} | {err} | {unknown} | {r.reason} | {r.run} |")
    return "\n".join(lines) + "\n"


# Why a row that runs for real misses the 1% (found by comparing the traced and the real op streams); shown in
# the report's reason column where the row has none of its own.
KNOWN_MISSES = {
    "switch_transformers": "routing: the real tiny step sends no token to one encoder expert (rows per expert "
                           "[5, 9, 2, 0], 16 tokens, the same batch every iteration), so that expert has no "
                           "gradient and no AdamW state (48 KB); the trace assumes balanced routing "
                           "(trace/shadow_values.py balanced_routing): the steady state of a run whose batches "
                           "reach every expert (the choice follows random weights meta has no values for)",
}


# Rows whose real step fails inside transformers itself (read in its source; memgraph does not patch it): the
# bug named before the raw error, only while the error is still the one the bug raises. (task, model type):
# (the error's text, the bug)
UPSTREAM_BUGS = {
    ("video-text-to-text", "kimi_k25"): (
        "split_with_sizes expects split_sizes to sum exactly",
        "transformers 5.23 bug, modeling_kimi_k25.py Kimi_K25Model.get_image_features: it splits a video's "
        "features by t*h*w/4 rows, but Kimi_K25VisionModel.forward already averaged the t frames (h*w/4 rows)"),
    ("video-text-to-text", "nemotron_h_omni"): (
        "must be tuple of Tensors, not Tensor",
        "transformers 5.23 bug, modeling_nemotron_h_omni.py: get_video_features returns pooler_output as one "
        "tensor (get_image_features splits it per image), and NemotronH_Omni_Reasoning_V3's forward torch.cat()s "
        "it as a tuple"),
}


def upstream_bug(task: str, model_type: str, error: BaseException) -> str:
    """``"<the named upstream bug>; "`` where this row's real-run error is a known bug of transformers, else ''."""
    match, bug = UPSTREAM_BUGS.get((task, model_type), (None, ""))
    return f"{bug}; " if match is not None and match in str(error) else ""


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.0f}%"


def write_reports(rows: list[Row], out: Path, seconds: float, total: int | None = None,
                  runs: list[dict] | None = None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(rows, seconds, total, runs))
    payload = {"tolerance": TOLERANCE, "seconds": round(seconds, 1), "planned": total, "shares": shares(rows),
               "runs": runs or [], "rows": [asdict(r) for r in rows]}
    out.with_suffix(".json").write_text(json.dumps(payload, indent=1, default=str) + "\n")


def sweep(tasks: list[str], only: str | None = None, out: Path | None = None, log=None) -> list[Row]:
    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    rows = []
    planned = architectures(tasks, only)
    for i, (task, model_type, class_name) in enumerate(planned):
        row = run_one(task, model_type, class_name)
        rows.append(row)
        if log is not None:
            err = "" if row.error_pct is None else f" {row.error_pct:+.3f}%"
            print(f"[{i + 1}] {task} {model_type}: {row.status}{err} {row.reason[:100]} ({row.seconds} s)",
                  file=log, flush=True)
        if out is not None and (i + 1) % 10 == 0:
            elapsed = time.perf_counter() - start
            write_reports(rows, out, elapsed, len(planned), [run_info("full sweep (in progress)", elapsed)])
    if out is not None:
        elapsed = time.perf_counter() - start
        write_reports(rows, out, elapsed, len(planned), [run_info("full sweep", elapsed)])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/coverage.py", description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=",".join(TASK_MAPPINGS),
                        help=f"comma-separated task families (default: all of {', '.join(TASK_MAPPINGS)})")
    parser.add_argument("--only", default=None, help="shell patterns on the model type, comma-separated, e.g. 'mixtral' or 'qwen*,longt5'")
    parser.add_argument("--sample", action="store_true", help="one architecture per family (a quick check)")
    parser.add_argument("--out", default="reports/coverage.md", help="markdown report (the JSON goes beside it)")
    parser.add_argument("--update", action="store_true",
                        help="re-run only the selected architectures and replace their rows in the existing report")
    args = parser.parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = [t for t in tasks if t not in TASK_MAPPINGS]
    if bad:
        print(f"tools/coverage.py: error: unknown task {bad[0]!r}; use some of {', '.join(TASK_MAPPINGS)}",
              file=sys.stderr)
        return 2
    if args.sample:
        rows = []
        for task in tasks:
            for model_type in SAMPLE.get(task, []):
                rows += sweep([task], model_type, None, sys.stderr)
        write_reports(rows, Path(args.out), 0.0)
    elif args.update:
        start = time.perf_counter()
        fresh = sweep(tasks, args.only, None, sys.stderr)
        what = f"--update --tasks {','.join(tasks)}" + (f" --only {args.only}" if args.only else "")
        update(Path(args.out), fresh, run_info(what, time.perf_counter() - start))
    else:
        sweep(tasks, args.only, Path(args.out), sys.stderr)
    return 0


# The run that wrote reports written before runs were recorded (the first full sweep, commit df2dab7).
_FIRST_RUN = {"when": "2026-11-23 07:50 UTC", "what": "full sweep", "seconds": None, "torch": "2.13.0+cpu",
              "transformers": "5.23.0", "commit": "df2dab7 (before the SDPA default)"}


def update(out: Path, fresh: list[Row], info: dict | None = None) -> None:
    """Replace the rows of ``fresh``'s (task, architecture) pairs in the report at ``out`` (its JSON beside it);
    ``info`` (:func:`run_info`) is appended to the report's runs and the fresh rows point at it."""
    payload = json.loads(out.with_suffix(".json").read_text())
    runs = payload.get("runs") or [dict(_FIRST_RUN, seconds=payload.get("seconds"))]
    if info is not None:
        runs.append(info)
        for r in fresh:
            r.run = len(runs) - 1
    new = {(r.task, r.model_type): r for r in fresh}
    rows = []
    for data in payload["rows"]:
        key = (data["task"], data["model_type"])
        rows.append(new.pop(key) if key in new else Row(**data))
    rows.extend(new.values())
    write_reports(rows, out, payload.get("seconds", 0.0), payload.get("planned"), runs)


if __name__ == "__main__":
    sys.exit(main())
