"""Inputs of audio-language models: audio tokens in a decoder-only prompt, sized from ``--audio-seconds``.

Task ``audio-text-to-text``: a class of transformers' ``MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES`` whose ``forward``
takes ``input_ids``, ``input_features`` and ``labels`` and neither images nor decoder inputs (Qwen2-Audio,
Voxtral, ...). Per sample, one clip of ``--audio-seconds`` (zoo ``defaults.audio_seconds`` else an error):

- ``input_features``: the log-mel frames the feature extractor transformers names for the model type
  (``FEATURE_EXTRACTOR_MAPPING_NAMES``; speech_inputs.py ``feature_extractor_for``: its defaults, the mel bins the
  config's audio encoder expects) makes from the clip, called with the padding the model's processor asks for
  (:data:`FAMILIES`, each with the file it comes from);
- the audio tokens: as many ``audio_token_id`` positions in ``input_ids`` as the model scatters audio features
  into, asked of the model itself: the audio encoder's ``_get_feat_extract_output_lengths`` of the frames the
  ``feature_attention_mask`` keeps (Qwen2-Audio: its processor uses the same formula), or the feature rows
  ``get_audio_features`` returns for the clip on ``meta`` (Voxtral: 375 per 30 s chunk);
- tokens per sample::

      [BOS] [audio] * T  [text ...]            (--seq-len tokens in all)

  ``attention_mask`` all ones, ``labels`` the ``input_ids`` with the audio positions ignored (-100).

The waveform is the same 440 Hz tone as speech_inputs.py; only its length matters. A model type of the task
without a rule in :data:`FAMILIES` is refused with :class:`NoAudioTextLayout` (the coverage tool's skip reason).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.auto_classes import auto_class
from memgraph.model_spec.image_tokens import feature_rows
from memgraph.model_spec.inputs import IGNORE_INDEX, Batch, InputSpec
from memgraph.model_spec.multimodal_inputs import KnownInput, _specials, _text_ids
from memgraph.model_spec.speech_inputs import feature_extractor_for

LONG = torch.int64
TEXT_SEED = 0  # as multimodal_inputs.py: the same text ids on meta and for real
TONE_HZ, TONE_AMPLITUDE = 440.0, 0.1  # speech_inputs.py's tone (silence divides by a zero std in some extractors)


class NoAudioTextLayout(MemgraphError):
    """The model is not an audio-language model memgraph can make inputs for."""


@dataclass(frozen=True)
class Family:
    """How one model type's processor calls its feature extractor, and how its audio tokens are counted."""

    extractor_kwargs: dict = field(default_factory=dict)
    tokens: str = "lengths"  # "lengths": the encoder's _get_feat_extract_output_lengths; "probe": get_audio_features
    chunk_frames: int | None = None  # mel frames per chunk the processor splits a clip into (stacked as a batch)
    source: str = ""


FAMILIES = {
    # processing_qwen2_audio.py ``_process_audio`` (transformers 5.23): padding="max_length" (30 s of
    # WhisperFeatureExtractor, which truncates longer clips by default), return_attention_mask=True, returned as
    # feature_attention_mask; audio tokens (((l - 1) // 2 + 1) - 2) // 2 + 1 for the l frames it keeps.
    "qwen2_audio": Family({"padding": "max_length", "return_attention_mask": True}, "lengths", None,
                          "processing_qwen2_audio.py _process_audio"),
    # processing_voxtral.py ``VoxtralProcessor.audio_kwargs`` (5.23): padding=True, truncation=False,
    # pad_to_multiple_of=480000 (30 s at 16 kHz), then ``_retrieve_input_features`` splits the frames into chunks of
    # max_source_positions (3000) stacked along the batch; get_audio_features reshapes the encoder's
    # [chunks, 1500, d_model] to rows of intermediate_size (4 * d_model in the released config: 375 per chunk).
    "voxtral": Family({"padding": True, "truncation": False, "pad_to_multiple_of": 480000}, "probe",
                      3000, "processing_voxtral.py VoxtralProcessor.audio_kwargs"),
}


def audio_text_class(cfg):
    """The multimodal-LM class transformers' auto mapping names for the config's model type, else None."""
    from transformers.models.auto import modeling_auto

    return auto_class(cfg, modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES)


def is_audio_text_class(cls) -> bool:
    """A decoder-only model taking audio features and text: ``input_ids``, ``input_features`` and ``labels`` in its
    forward, no ``pixel_values`` and no ``decoder_input_ids``."""
    if cls is None or not hasattr(cls, "forward"):
        return False
    params = inspect.signature(cls.forward).parameters
    return ({"input_ids", "input_features", "labels"} <= set(params)
            and "pixel_values" not in params and "decoder_input_ids" not in params)


def is_audio_text_class_name(class_name: str) -> bool:
    """:func:`is_audio_text_class` for a transformers class named in MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES."""
    from transformers.models.auto import modeling_auto

    names = modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES.values()
    if not any(class_name == n or (isinstance(n, (list, tuple)) and class_name in n) for n in names):
        return False
    import transformers

    try:
        cls = getattr(transformers, class_name, None)
    except Exception:  # a class whose import needs a package memgraph does not install
        return False
    return is_audio_text_class(cls)


@dataclass(frozen=True)
class AudioClip:
    """One clip as the model takes it: the extractor's arrays, and the audio tokens it becomes in the text."""

    features: torch.Tensor  # [clips or chunks, mel bins, frames]
    mask: torch.Tensor | None  # feature_attention_mask [clips, frames] where the model takes one
    tokens: int


def audio_clip(cfg, seconds: float) -> AudioClip:
    """The features and audio-token count of one ``seconds`` clip for ``cfg``'s model (see the module docstring)."""
    family = FAMILIES.get(getattr(cfg, "model_type", None))
    cls = audio_text_class(cfg)
    if family is None or not is_audio_text_class(cls):
        known = ", ".join(sorted(FAMILIES))
        raise NoAudioTextLayout(f"no audio-text input recipe for model_type {getattr(cfg, 'model_type', '?')!r} "
                                f"(memgraph has one for {known}); describe the inputs with --input")
    extractor = feature_extractor_for(cfg)
    if extractor is None:
        raise NoAudioTextLayout(f"transformers names no feature extractor for {cfg.model_type}; describe the "
                                "inputs with --input")
    rate = int(getattr(extractor, "sampling_rate", 16000))
    import numpy as np

    t = np.arange(max(1, round(seconds * rate)), dtype=np.float32) / rate
    wave = (TONE_AMPLITUDE * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)
    made = extractor(wave, sampling_rate=rate, return_tensors="pt", **family.extractor_kwargs)
    features = made["input_features"]
    if family.chunk_frames:
        features = features.reshape(features.shape[1], -1, family.chunk_frames).transpose(0, 1)
    mask = made.get("attention_mask") if family.extractor_kwargs.get("return_attention_mask") else None
    if family.tokens == "lengths":
        tokens = int(_encoder_lengths(cfg, mask.sum(-1)).sum())
    else:
        tokens = _probe_rows(cfg, cls, features)
    return AudioClip(features, mask, tokens)


def _audio_config(cfg):
    audio = getattr(cfg, "audio_config", None)
    if audio is None:
        raise NoAudioTextLayout(f"{cfg.model_type}'s config has no audio_config; describe the inputs with --input")
    return audio


def _encoder_lengths(cfg, frames: torch.Tensor) -> torch.Tensor:
    """The audio encoder's own ``_get_feat_extract_output_lengths`` (its output positions for ``frames`` mel
    frames), from the encoder class transformers maps the audio sub-config's model type to; it reads no state."""
    from transformers.models.auto import modeling_auto

    encoder = auto_class(_audio_config(cfg), modeling_auto.MODEL_MAPPING_NAMES)
    rule = getattr(encoder, "_get_feat_extract_output_lengths", None)
    if rule is None:
        raise NoAudioTextLayout(f"{cfg.model_type}'s audio encoder has no _get_feat_extract_output_lengths to count "
                                "its audio tokens; describe the inputs with --input")
    return rule(None, frames)[1]


def _probe_rows(cfg, cls, features: torch.Tensor) -> int:
    """The feature rows ``get_audio_features`` returns for ``features`` on ``meta`` (no weights, shapes only)."""
    what = f"{cfg.model_type}'s audio tokens"
    hidden = cfg.get_text_config().hidden_size
    try:
        with torch.device("meta"):
            model = cls(copy.deepcopy(cfg))
            out = model.get_audio_features(torch.empty(features.shape))
    except Exception as e:
        raise MemgraphError(f"cannot count {what}: get_audio_features on meta failed ({type(e).__name__}: "
                            f"{str(e)[:160]}); describe the inputs with --input") from e
    return feature_rows(out, hidden, what)


def audio_text_to_text(cfg, opts, defaults: dict, dtype: torch.dtype) -> Batch:
    """Batch for an audio-language model (see the module docstring)."""
    seconds = opts.audio_seconds or defaults.get("audio_seconds")
    if seconds is None:
        raise MemgraphError("no default audio length for this model: pass --audio-seconds")
    seq = opts.seq_len or defaults.get("seq_len")
    if seq is None:
        raise MemgraphError("no default sequence length for this model: pass --seq-len")
    clip = audio_clip(cfg, seconds)
    b, per = opts.batch_size, clip.tokens
    if seq < per + 2:
        raise MemgraphError(f"--seq-len {seq} cannot hold {seconds:g} s of audio ({per} audio tokens with the text "
                            f"around them): pass --seq-len {per + 2} or more, or fewer --audio-seconds")
    text = cfg.get_text_config()
    gen = torch.Generator().manual_seed(TEXT_SEED)
    ids = _text_ids(b * seq, text.vocab_size, _specials(cfg) | {_audio_token(cfg)}, gen).view(b, seq)
    bos = getattr(text, "bos_token_id", None)
    ids[:, 0] = bos if isinstance(bos, int) else ids[:, 0]
    audio = torch.zeros(b, seq, dtype=torch.bool)
    audio[:, 1:1 + per] = True
    ids[audio] = _audio_token(cfg)
    feats = clip.features
    inputs = [KnownInput("input_ids", tuple(ids.shape), LONG, None, ids),
              InputSpec("input_features", (b * feats.shape[0], *feats.shape[1:]), dtype)]
    if clip.mask is not None:
        mask = clip.mask.to(LONG).repeat(b, 1)
        inputs.append(KnownInput("feature_attention_mask", tuple(mask.shape), LONG, None, mask))
    ones = torch.ones(b, seq, dtype=LONG)
    labels = ids.masked_fill(audio, IGNORE_INDEX)
    inputs += [KnownInput("attention_mask", tuple(ones.shape), LONG, None, ones),
               KnownInput("labels", tuple(labels.shape), LONG, None, labels)]
    chunks = f" in {feats.shape[0]} chunks of {feats.shape[-1]} frames" if feats.shape[0] > 1 else ""
    note = (f"audio: {seconds:g} s per sample -> input_features {list(feats.shape[1:])}{chunks} -> {per} audio "
            f"tokens in the text")
    return Batch(tuple(inputs), {}, notes=(note,))


def _audio_token(cfg) -> int:
    for key in ("audio_token_id", "audio_token_index"):
        v = getattr(cfg, key, None)
        if isinstance(v, int):
            return v
    raise NoAudioTextLayout(f"{cfg.model_type}'s config has no audio_token_id; describe the inputs with --input")


__all__ = ["NoAudioTextLayout", "FAMILIES", "audio_text_to_text", "audio_clip", "is_audio_text_class_name"]
