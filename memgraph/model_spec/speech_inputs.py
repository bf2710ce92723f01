"""Inputs of speech-to-text encoder-decoder models other than Whisper, made by the model's own feature extractor.

A speech encoder-decoder of transformers (``MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES``) whose ``forward`` takes
``decoder_input_ids`` and an audio input, ``input_features`` (log-mel frames: Speech2Text, SeamlessM4T, Canary,
Cohere ASR) or ``input_values`` (the waveform: SpeechT5, Moonshine), gets:

- the audio input (and its ``attention_mask`` where the clip leaves some of it padding) exactly as the feature extractor transformers names for the model type
  (``FEATURE_EXTRACTOR_MAPPING_NAMES``) makes them from ``--audio-seconds`` of audio at its ``sampling_rate``,
  built with its defaults (the ``feature_size`` set to the config's ``num_mel_bins`` where the config or its
  encoder's sub-config has one):
  the frame count, stride stacking (SeamlessM4T: 2 frames of 80 bins -> 160 values) and padding are the
  extractor's own, not a formula copied from it. The waveform is a 440 Hz tone; only its shapes matter (an all-ones ``attention_mask``
  is left out, as the models treat a missing one);
- ``labels`` ``[batch, --target-len]`` of token ids below the decoder's vocabulary; the model shifts them right
  behind ``decoder_start_token_id`` into its decoder inputs and takes cross-entropy, as in training.

Whisper keeps its own recipe (tasks.py ``speech_seq2seq``: exactly 30 s, the learned decoder positions).
Audio language models that put audio tokens into a decoder-only prompt (Voxtral, Granite Speech, Qwen3-ASR) have
their own task and recipe (audio_text_inputs.py); text-to-speech models are not this layout: :class:`NoSpeechLayout`.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.auto_classes import auto_class
from memgraph.model_spec.inputs import Batch, InputSpec
from memgraph.model_spec.multimodal_inputs import KnownInput

LONG = torch.int64
AUDIO_INPUTS = ("input_features", "input_values")
MEL_BIN_KEYS = ("num_mel_bins",)  # config attributes that fix the extractor's feature_size
# Models whose encoder takes the mel frames as its embeddings, so its width is the mel bins: Pop2Piano
# (modeling_pop2piano.py: input_features [batch, frames, hidden_size] go through the mel conditioner into the T5
# encoder as inputs_embeds; Pop2PianoFeatureExtractor feature_size 512 = Pop2PianoConfig d_model 512)
WIDTH_AS_MEL_BINS = {"pop2piano": "d_model"}
# Model types for which transformers 5.23 names no feature extractor (FEATURE_EXTRACTOR_MAPPING_NAMES) but whose
# processor drives another family's: MusicFlamingoProcessor._process_audio (processing_musicflamingo.py) reads
# ``feature_extractor.chunk_length`` and says "AudioFlamingo doesn't have its own feature extractor" (Audio Flamingo
# 3's is WhisperFeatureExtractor); MoonshineStreamingProcessor (processing_moonshine_streaming.py) pads the raw
# waveform (``audio_kwargs`` pad_to_multiple_of 80, the encoder's frame of sample_rate * frame_ms / 1000 = 80
# samples), as Moonshine's Wav2Vec2FeatureExtractor does.
SHARED_EXTRACTORS = {"musicflamingo": "audioflamingo3", "moonshine_streaming": "moonshine"}


class NoSpeechLayout(MemgraphError):
    """The model is not a speech encoder-decoder memgraph can make inputs for."""


def speech_class(cfg):
    """The speech sequence-to-sequence class transformers' auto mapping names for the config's model type, else None."""
    from transformers.models.auto import modeling_auto

    return auto_class(cfg, modeling_auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES)


def feature_extractor_for(cfg):
    """The model type's feature extractor with its defaults (``feature_size`` = the config's mel bins), or None."""
    from transformers.models.auto import feature_extraction_auto

    names = feature_extraction_auto.FEATURE_EXTRACTOR_MAPPING_NAMES
    cls = auto_class(cfg, names)
    shared = SHARED_EXTRACTORS.get(getattr(cfg, "model_type", None))
    if cls is None and shared is not None:
        from memgraph.private_api import unavailable

        too_old = unavailable("transformers_audio_processors")  # the processor's class-level audio_kwargs
        if too_old:
            raise NoSpeechLayout(f"{too_old}, or describe the inputs with --input")
        cls = auto_class(_TypeOnly(shared), names)
    encoder = getattr(cfg, "encoder", None)  # SpeechEncoderDecoderModel: its encoder's extractor (wav2vec2's ...)
    if cls is None and getattr(cfg, "model_type", None) == "speech-encoder-decoder" and encoder is not None:
        return feature_extractor_for(encoder)
    if cls is None:
        return None
    kwargs = {}
    bins = _mel_bins(cfg)
    if bins is not None and "feature_size" in inspect.signature(cls.__init__).parameters:
        kwargs["feature_size"] = bins
    try:
        return cls(**kwargs)
    except ImportError as e:  # e.g. an extractor that needs torchaudio or librosa
        from memgraph.model_spec.torchaudio_shapes import stand_in_extractor

        stand_in = stand_in_extractor(cls.__name__, kwargs)  # torchaudio: its spectrogram's shape (that module)
        if stand_in is not None:
            return stand_in
        raise NoSpeechLayout(f"{cls.__name__} needs a package memgraph does not install ({str(e).strip().splitlines()[0]})")


class _TypeOnly:
    """A stand-in carrying only a model type, to look a family up in an auto mapping."""

    def __init__(self, model_type: str):
        self.model_type = model_type


def _mel_bins(cfg, depth: int = 0) -> int | None:
    """The config's mel bins: its own ``num_mel_bins``, else its audio encoder's (Canary's ``encoder_config``)."""
    keys = (WIDTH_AS_MEL_BINS[cfg.model_type],) if getattr(cfg, "model_type", None) in WIDTH_AS_MEL_BINS else MEL_BIN_KEYS
    found = next((getattr(cfg, k) for k in keys if isinstance(getattr(cfg, k, None), int)), None)
    if found is not None or depth > 1:
        return found
    for value in vars(cfg).values():
        if hasattr(value, "to_dict") and hasattr(value, "model_type"):
            found = _mel_bins(value, depth + 1)
            if found is not None:
                return found
    return None


def speech_encoder_decoder(cfg, opts, defaults: dict, dtype: torch.dtype) -> Batch:
    """Batch for a speech encoder-decoder (see the module docstring)."""
    cls = speech_class(cfg)
    params = inspect.signature(cls.forward).parameters if cls is not None else {}
    takes = [n for n in AUDIO_INPUTS if n in params]
    if not takes or "decoder_input_ids" not in params or "labels" not in params:
        raise NoSpeechLayout(f"{getattr(cfg, 'model_type', '?')} is not a speech encoder-decoder taking "
                             f"input_features or input_values with decoder labels; describe its inputs with --input")
    extractor = feature_extractor_for(cfg)
    if extractor is None:
        raise NoSpeechLayout(f"transformers names no feature extractor for {cfg.model_type}; describe its inputs "
                             "with --input")
    # SpeechEncoderDecoderModel takes both names: the one its encoder's extractor makes (wav2vec2: input_values)
    made_names = list(getattr(extractor, "model_input_names", ()) or ())
    audio = next((n for n in made_names if n in takes), takes[0])
    seconds = opts.audio_seconds or defaults.get("audio_seconds")
    if seconds is None:
        raise MemgraphError("no default audio length for this model: pass --audio-seconds")
    target = opts.target_len or defaults.get("target_len")
    if target is None:
        raise MemgraphError("no default target length for this model: pass --target-len")
    rate = int(getattr(extractor, "sampling_rate", 16000))
    import numpy as np

    t = np.arange(max(1, round(seconds * rate)), dtype=np.float32) / rate
    wave = (0.1 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)  # a tone: silence divides by a zero std
    if type(extractor).__name__ in BEAT_TRACKING:
        wave = _clicks(len(t), rate)
    try:
        made = extractor(wave, sampling_rate=rate, return_tensors="pt", **_processor_padding(cfg))
    except ValueError as e:
        if type(extractor).__name__ not in BEAT_TRACKING:
            raise
        raise MemgraphError(f"{type(extractor).__name__} found no beats to cut {seconds:g} s of audio at (its "
                            f"beat tracker needs a few seconds): pass --audio-seconds {BEAT_SECONDS} or more") from e
    if audio not in made:
        raise NoSpeechLayout(f"{type(extractor).__name__} makes {', '.join(made)} but {cls.__name__} takes {audio}")
    b = opts.batch_size
    feats = made[audio]
    inputs = [InputSpec(audio, (b, *feats.shape[1:]), dtype)]
    mask = made.get("attention_mask")
    if mask is not None and "attention_mask" in params and not bool(mask.all()):
        values = mask.to(LONG).expand(b, *mask.shape[1:]).clone()
        inputs.append(KnownInput("attention_mask", tuple(values.shape), LONG, None, values))
    vocab = getattr(cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg, "vocab_size", None)
    if not isinstance(vocab, int):
        raise NoSpeechLayout(f"{cfg.model_type}'s config has no vocab_size for the decoder labels")
    inputs.append(InputSpec("labels", (b, target), LONG, vocab))
    return Batch(tuple(inputs), {})


# Extractors whose output follows the beats they find (Pop2PianoFeatureExtractor: essentia's RhythmExtractor2013,
# one input_features row per beat-aligned segment); a tone has none, so they get a metronome: 1 kHz clicks of 200
# samples at 120 beats per minute. Measured (transformers 5.23, essentia 2.1b6): 1 and 2 s of it find no beats,
# 4 s make one segment of 39 frames.
BEAT_TRACKING = ("Pop2PianoFeatureExtractor",)
BEAT_SECONDS = 4
CLICK_HZ, CLICK_SAMPLES, BEATS_PER_MINUTE = 1000.0, 200, 120


def _clicks(samples: int, rate: int):
    import numpy as np

    wave = np.zeros(samples, dtype=np.float32)
    click = np.sin(2 * np.pi * CLICK_HZ * np.arange(CLICK_SAMPLES) / rate).astype(np.float32)
    for start in range(0, samples, rate * 60 // BEATS_PER_MINUTE):
        end = min(samples, start + CLICK_SAMPLES)
        wave[start:end] = click[:end - start]
    return wave


# Padding keys of a processor's class-level ``audio_kwargs`` that change the extractor's output shape
# (MoonshineStreamingProcessor: pad_to_multiple_of 80, padding True).
PADDING_KEYS = ("padding", "pad_to_multiple_of")


def _processor_padding(cfg) -> dict:
    """The padding the processor transformers names for the model type asks of its extractor (``audio_kwargs``)."""
    from transformers.models.auto import processing_auto

    proc = auto_class(cfg, processing_auto.PROCESSOR_MAPPING_NAMES)
    kwargs = getattr(proc, "audio_kwargs", None) or {}
    return {k: kwargs[k] for k in PADDING_KEYS if k in kwargs} if isinstance(kwargs, dict) else {}


__all__ = ["NoSpeechLayout", "speech_encoder_decoder", "feature_extractor_for"]
