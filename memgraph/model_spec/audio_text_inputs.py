"""Inputs of audio-language models: audio tokens in a decoder-only prompt, sized from ``--audio-seconds``.

Task ``audio-text-to-text``: a class of transformers' ``MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES`` whose ``forward``
takes ``input_ids``, ``input_features`` and ``labels`` and neither images nor decoder inputs (Qwen2-Audio,
Voxtral, ...). Per sample, one clip of ``--audio-seconds`` (zoo ``defaults.audio_seconds`` else an error):

- ``input_features`` and its mask (``feature_attention_mask`` / ``input_features_mask``) exactly as the model's
  processor (``PROCESSOR_MAPPING_NAMES``) makes them, by its own audio code run without a tokenizer
  (private_api.py ``processor_without_tokenizer``), with its default ``audio_kwargs`` and the feature extractor
  transformers names for the model type (speech_inputs.py ``feature_extractor_for``: its defaults, the mel bins the
  config's audio encoder expects). ``_process_audio`` (Qwen2-Audio: padded to 30 s, longer clips truncated;
  GLM-ASR and Audio Flamingo 3: 30 s windows up to ``max_audio_len``; Qwen3-ASR) also gives the audio tokens
  (``num_audio_tokens``); Voxtral's ``_retrieve_input_features`` pads to a multiple of 30 s and stacks chunks of
  3000 frames, and its tokens are the feature rows ``get_audio_features`` returns for them on ``meta`` (375 per
  chunk);
- tokens per sample::

      [BOS] [audio] * T  [text ...]            (--seq-len tokens in all)

  ``attention_mask`` all ones, ``labels`` the ``input_ids`` with the audio positions ignored (-100).

The waveform is the same 440 Hz tone as speech_inputs.py; only its length matters. A model that takes the
waveform itself (VibeVoice-ASR: ``input_values`` and ``padding_mask``) gets it as its processor pads it. Extractors
that need torchaudio (Granite Speech, Fun-ASR-Nano) run with the shape of its spectrogram (torchaudio_shapes.py).
A model of the task whose processor has neither method, or whose extractor needs a package memgraph does not
install, or whose audio layout comes from a tokenizer file (Voxtral Realtime), and every model under transformers
5.16 (before ``_process_audio``), is refused with :class:`NoAudioTextLayout` (the coverage tool's skip reason).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.auto_classes import auto_class
from memgraph.model_spec.image_tokens import feature_rows, model_class_for
from memgraph.model_spec.inputs import IGNORE_INDEX, Batch, InputSpec
from memgraph.model_spec.multimodal_inputs import KnownInput, image_text_to_text, sample_text_ids
from memgraph.model_spec.speech_inputs import NoSpeechLayout, feature_extractor_for
from memgraph.private_api import processor_audio_replacements, processor_without_tokenizer, unavailable, voxtral_input_features

LONG = torch.int64
TONE_HZ, TONE_AMPLITUDE = 440.0, 0.1  # speech_inputs.py's tone (silence divides by a zero std in some extractors)


class NoAudioTextLayout(MemgraphError):
    """The model is not an audio-language model memgraph can make inputs for."""


# VoxtralProcessor.audio_kwargs["max_source_positions"] (processing_voxtral.py, transformers 5.23): the mel frames
# of one chunk; the processor splits a clip's frames into such chunks, stacked along the batch
VOXTRAL_CHUNK_KEY = "max_source_positions"
# Where processors name the feature mask; the model's forward takes it under the same name.
FEATURE_MASKS = ("feature_attention_mask", "input_features_mask", "padding_mask")  # padding_mask: VibeVoice-ASR's
# The audio inputs of an audio-language model's forward: log-mel frames, or the waveform (VibeVoice-ASR, whose
# acoustic tokenizer encodes it: VibeVoiceAcousticTokenizerFeatureExtractor makes input_values and padding_mask)
AUDIO_INPUTS = ("input_features", "input_values")
# Processors whose audio layout comes from a tokenizer file memgraph never downloads (processing_voxtral_realtime.py,
# transformers 5.23: mistral-common's encode_transcription pads the clip by the audio config of the checkpoint's
# tekken.json, its transcription delay and left/right pad tokens, before the extractor runs)
NEEDS_TOKENIZER_FILE = {
    "voxtral_realtime": "VoxtralRealtimeProcessor pads the audio by the audio config of mistral-common's tokenizer "
                        "file (the released checkpoint's tekken.json: transcription delay, left and right pad "
                        "tokens), which memgraph does not download"}
# Where _process_audio gives the audio tokens per clip (GraniteSpeechFeatureExtractor: audio_embed_sizes, what
# GraniteSpeechProcessor.replace_audio_token repeats the audio token by)
TOKEN_COUNTS = ("num_audio_tokens", "audio_embed_sizes")


def audio_text_class(cfg):
    """The multimodal-LM (else seq2seq-LM) class transformers' auto mappings name for the config's model type."""
    from transformers.models.auto import modeling_auto

    return (auto_class(cfg, modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES)
            or auto_class(cfg, modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES))


def is_audio_text_class(cls) -> bool:
    """A decoder-only model taking audio features and text: ``input_ids``, ``input_features`` and ``labels`` in its
    forward, no ``pixel_values`` and no ``decoder_input_ids``."""
    if cls is None or not hasattr(cls, "forward"):
        return False
    params = inspect.signature(cls.forward).parameters
    return ({"input_ids", "labels"} <= set(params) and any(n in params for n in AUDIO_INPUTS)
            and "pixel_values" not in params and "decoder_input_ids" not in params)


def audio_input_name(cls) -> str:
    """The audio input the class's forward takes: log-mel ``input_features``, else the waveform ``input_values``."""
    params = inspect.signature(cls.forward).parameters
    return next(n for n in AUDIO_INPUTS if n in params)


def is_audio_text_class_name(class_name: str) -> bool:
    """:func:`is_audio_text_class` for a transformers class named in MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES or
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES."""
    from transformers.models.auto import modeling_auto

    names = [*modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES.values(),
             *modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES.values()]  # Audio Flamingo 3 is only here
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
    """One clip as the model takes it: the processor's arrays, and the audio tokens it becomes in the text."""

    features: torch.Tensor  # [clips or chunks, mel bins, frames]
    mask_name: str | None  # the feature mask's name where the processor makes one
    mask: torch.Tensor | None  # [clips or chunks, frames]
    tokens: int


def processor_class(cfg):
    """The processor class transformers names for the config's model type (PROCESSOR_MAPPING_NAMES), else None."""
    from transformers.models.auto import processing_auto

    return auto_class(cfg, processing_auto.PROCESSOR_MAPPING_NAMES)


def audio_clip(cfg, seconds: float) -> AudioClip:
    """The features and audio-token count of one ``seconds`` clip for ``cfg``'s model (see the module docstring)."""
    cls = audio_text_class(cfg)
    if not is_audio_text_class(cls):
        raise NoAudioTextLayout(f"{getattr(cfg, 'model_type', '?')} is not an audio-language model taking input_ids, "
                                "input_features and labels; describe the inputs with --input")
    return _clip(cfg, seconds, cfg, cls)


def processor_clip(cfg, seconds: float, cls) -> AudioClip:
    """One clip as the processor transformers names for ``cfg``'s model type makes it (``_process_audio``), for a
    model ``cls`` of another task that takes the same audio inputs (VibeVoice text-to-speech: tts_inputs.py)."""
    return _clip(cfg, seconds, cfg, cls)


def thinker_audio_clip(cfg, seconds: float) -> AudioClip:
    """:func:`audio_clip` for an omni model's thinker (``qwen2_5_omni_thinker``, ``qwen3_omni_moe_thinker``):
    transformers names the processor and feature extractor for the whole model's type (``qwen2_5_omni``), whose
    text-generating part the thinker is."""
    parent = _ParentType(cfg, str(cfg.model_type).removesuffix("_thinker"))
    return _clip(parent, seconds, cfg, None)


def image_text_with_audio(cfg, opts, defaults: dict, dtype: torch.dtype) -> Batch:
    """Task ``image-text-to-text``: multimodal_inputs.py's layouts, with ``--audio-seconds`` an omni thinker's clip
    (:func:`thinker_audio_clip`) beside its images; refused for a model whose forward takes no ``input_features``."""
    seconds = getattr(opts, "audio_seconds", None)
    if not seconds:
        return image_text_to_text(cfg, opts, defaults, dtype)
    cls = model_class_for(cfg)
    if cls is None or "input_features" not in inspect.signature(cls.forward).parameters:
        raise MemgraphError(f"--audio-seconds: {getattr(cfg, 'model_type', '?')} takes no audio input: drop "
                            "--audio-seconds")
    return image_text_to_text(cfg, opts, defaults, dtype, audio=thinker_audio_clip(cfg, seconds))


class _ParentType:
    """A config seen under another model type (its processor's mapping key); every other attribute is the config's."""

    def __init__(self, cfg, model_type: str):
        self.config, self.model_type = cfg, model_type

    def __getattr__(self, name):
        return getattr(self.config, name)


def _clip(lookup, seconds: float, cfg, cls) -> AudioClip:
    """The clip as the processor transformers names for ``lookup.model_type`` makes it; tokens by probing ``cls``
    where the processor does not count them (Voxtral)."""
    too_old = unavailable("transformers_audio_processors")
    if too_old:
        raise NoAudioTextLayout(f"{too_old}, or describe the inputs with --input")
    if getattr(cfg, "model_type", None) in NEEDS_TOKENIZER_FILE:
        raise NoAudioTextLayout(f"{NEEDS_TOKENIZER_FILE[cfg.model_type]}; describe the inputs with --input")
    proc_cls = processor_class(lookup)
    how = ("chunks" if hasattr(proc_cls, "_retrieve_input_features") and cls is not None else
           "process" if _own(proc_cls, "_process_audio") else None)
    if how is None:
        raise NoAudioTextLayout(f"no audio-text input recipe for model_type {getattr(cfg, 'model_type', '?')!r}: "
                                "memgraph makes audio inputs with the processor's _process_audio (Qwen2-Audio, "
                                "GLM-ASR, Audio Flamingo 3, Qwen3-ASR, Qwen2.5-Omni) or _retrieve_input_features "
                                "(Voxtral); describe the inputs with --input")
    try:
        extractor = feature_extractor_for(lookup)
    except NoSpeechLayout as e:
        raise NoAudioTextLayout(str(e)) from None
    if extractor is None:
        raise NoAudioTextLayout(f"transformers names no feature extractor for {cfg.model_type}; describe the "
                                "inputs with --input")
    rate = int(getattr(extractor, "sampling_rate", 16000))
    import numpy as np

    t = np.arange(max(1, round(seconds * rate)), dtype=np.float32) / rate
    wave = (TONE_AMPLITUDE * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)
    proc = processor_without_tokenizer(proc_cls, extractor)
    kwargs = {**(getattr(proc_cls, "audio_kwargs", None) or {}), "sampling_rate": rate, "return_tensors": "pt"}
    if how == "chunks":
        chunk = int(kwargs.pop(VOXTRAL_CHUNK_KEY))
        features = voxtral_input_features(proc, [wave], chunk, kwargs)
        return AudioClip(features, None, None, _probe_rows(cfg, cls, features))
    made, replaced = processor_audio_replacements(proc, [wave], kwargs)
    mask_name = next((n for n in FEATURE_MASKS if n in made), None)
    # VibeVoiceProcessor returns no count: the audio tokens its replacement text repeats
    counts = next((made[k] for k in TOKEN_COUNTS if k in made), replaced)
    tokens = int(sum(int(n) for n in counts))
    audio = next(n for n in AUDIO_INPUTS if n in made)
    return AudioClip(made[audio], mask_name, made.get(mask_name), tokens)


def _own(proc_cls, name: str) -> bool:
    """Whether the processor class defines ``name`` itself (ProcessorMixin's raises NotImplementedError)."""
    from transformers import ProcessorMixin

    return proc_cls is not None and getattr(proc_cls, name, None) is not getattr(ProcessorMixin, name, None)


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
    ids, _ = sample_text_ids(cfg, b, seq, also_special=frozenset({_audio_token(cfg)}))
    bos = getattr(text, "bos_token_id", None)
    ids[:, 0] = bos if isinstance(bos, int) else ids[:, 0]
    audio = torch.zeros(b, seq, dtype=torch.bool)
    audio[:, 1:1 + per] = True
    ids[audio] = _audio_token(cfg)
    feats = clip.features
    inputs = [KnownInput("input_ids", tuple(ids.shape), LONG, None, ids),
              InputSpec(audio_input_name(audio_text_class(cfg)), (b * feats.shape[0], *feats.shape[1:]), dtype)]
    if clip.mask is not None:
        # a boolean mask stays one: Granite Speech indexes its projector output with it (audio_features[mask])
        kind = torch.bool if clip.mask.dtype == torch.bool else LONG
        mask = clip.mask.to(kind).repeat(b, 1)
        inputs.append(KnownInput(clip.mask_name, tuple(mask.shape), kind, None, mask))
    ones = torch.ones(b, seq, dtype=LONG)
    labels = ids.masked_fill(audio, IGNORE_INDEX)
    inputs += [KnownInput("attention_mask", tuple(ones.shape), LONG, None, ones),
               KnownInput("labels", tuple(labels.shape), LONG, None, labels)]
    chunks = f" in {feats.shape[0]} chunks of {feats.shape[-1]} frames" if feats.shape[0] > 1 else ""
    note = (f"audio: {seconds:g} s per sample -> {audio_input_name(audio_text_class(cfg))} {list(feats.shape[1:])}{chunks} -> {per} audio "
            f"tokens in the text")
    return Batch(tuple(inputs), {}, notes=(note,))


def _audio_token(cfg) -> int:
    for key in ("audio_token_id", "audio_token_index"):
        v = getattr(cfg, key, None)
        if isinstance(v, int):
            return v
    raise NoAudioTextLayout(f"{cfg.model_type}'s config has no audio_token_id; describe the inputs with --input")


__all__ = ["NoAudioTextLayout", "processor_clip", "thinker_audio_clip", "image_text_with_audio", "audio_text_to_text", "audio_clip", "is_audio_text_class_name"]
