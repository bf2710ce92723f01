"""Inputs of text-to-speech models trained with a language-model loss and a diffusion loss: VibeVoice.

``VibeVoiceForConditionalGeneration.forward`` (transformers 5.23, modeling_vibevoice.py) trains on what
``VibeVoiceProcessor(text, audio, output_labels=True)`` (processing_vibevoice.py) makes: ``input_ids`` whose audio
placeholders its acoustic tokenizer fills from ``input_values``, ``labels`` (audio placeholders -100; audio
BOS/EOS and the text EOS kept), and ``acoustic_loss_mask`` (True at the audio placeholders, where the diffusion
head's loss is taken). The loss is ``(1 - diffusion_loss_weight) * LM loss + diffusion_loss_weight * diffusion
loss``. Per sample, one clip of ``--audio-seconds`` and a transcript of ``--target-len`` tokens::

    [text] * target_len  [audio_bos] [audio] * T [audio_eos] [eos]

- ``input_values`` and ``padding_mask`` exactly as the processor's ``_process_audio`` makes them
  (audio_text_inputs.py ``processor_clip``): VibeVoiceAcousticTokenizerFeatureExtractor at ``audio_kwargs``
  ``sampling_rate`` 24000, padded to its ``pad_to_multiple_of`` 3200 samples; T is the count its
  ``replace_audio_token`` repeats the audio token by, ceil(samples / 3200) (7.5 tokens per second);
- the placeholder and BOS/EOS ids are the config's ``audio_token_id``, ``audio_bos_token_id``,
  ``audio_eos_token_id`` and ``eos_token_id``; ``attention_mask`` all ones.

The diffusion loss needs a noise scheduler: with none passed, transformers builds diffusers'
``DPMSolverMultistepScheduler`` (generation_vibevoice.py ``_build_default_noise_scheduler``), and diffusers is a
package memgraph does not install (the optional ``tts`` extra; it also installs Pillow, which transformers' image
processors look for): without it the model is refused with :class:`NoSpeechLayout` naming diffusers.
"""

from __future__ import annotations

import inspect

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX, Batch, InputSpec
from memgraph.model_spec.multimodal_inputs import KnownInput, sample_text_ids
from memgraph.model_spec.speech_inputs import NoSpeechLayout, speech_class

LONG = torch.int64
# The forward parameter that marks a diffusion-loss text-to-speech head (VibeVoiceForConditionalGeneration)
DIFFUSION_MASK = "acoustic_loss_mask"
TOKEN_KEYS = ("audio_bos_token_id", "audio_token_id", "audio_eos_token_id", "eos_token_id")


def is_diffusion_tts(cfg) -> bool:
    """Whether the config's speech class trains on a diffusion mask beside its labels and waveform."""
    cls = speech_class(cfg)
    if cls is None:
        return False
    params = inspect.signature(cls.forward).parameters
    return {DIFFUSION_MASK, "labels", "input_ids", "input_values"} <= set(params)


def diffusers_missing(cls) -> str:
    """The refusal when transformers' default noise scheduler cannot be built (no diffusers), else ''."""
    from transformers.utils import is_diffusers_available

    if is_diffusers_available():
        return ""
    return (f"{cls.__name__}'s diffusion loss needs diffusers (its default noise scheduler), which memgraph "
            "does not install: pip install diffusers, or describe the inputs with --input")


def tts_batch(cfg, opts, defaults: dict, dtype: torch.dtype) -> Batch:
    """Batch for a diffusion-loss text-to-speech model (see the module docstring)."""
    from memgraph.model_spec.audio_text_inputs import NoAudioTextLayout, processor_clip

    cls = speech_class(cfg)
    seconds = opts.audio_seconds or defaults.get("audio_seconds")
    if seconds is None:
        raise MemgraphError("no default audio length for this model: pass --audio-seconds")
    text_len = opts.target_len or defaults.get("target_len")
    if text_len is None:
        raise MemgraphError("no default transcript length for this model: pass --target-len")
    missing = diffusers_missing(cls)
    if missing:
        raise NoSpeechLayout(missing)
    ids_of = {}
    for key in TOKEN_KEYS:
        value = getattr(cfg, key, None)
        if not isinstance(value, int):
            raise NoSpeechLayout(f"{cfg.model_type}'s config has no {key}; describe its inputs with --input")
        ids_of[key] = value
    try:
        clip = processor_clip(cfg, seconds, cls)
    except NoAudioTextLayout as e:
        raise NoSpeechLayout(str(e)) from None
    b, per = opts.batch_size, clip.tokens
    seq = text_len + per + 3
    ids, _ = sample_text_ids(cfg, b, seq, also_special=frozenset(ids_of.values()))
    start = text_len
    ids[:, start] = ids_of["audio_bos_token_id"]
    audio = torch.zeros(b, seq, dtype=torch.bool)
    audio[:, start + 1:start + 1 + per] = True
    ids[audio] = ids_of["audio_token_id"]
    ids[:, start + 1 + per] = ids_of["audio_eos_token_id"]
    ids[:, -1] = ids_of["eos_token_id"]
    labels = ids.masked_fill(audio, IGNORE_INDEX)
    ones = torch.ones(b, seq, dtype=LONG)
    feats = clip.features
    mask = clip.mask.to(LONG).repeat(b, 1)
    inputs = (KnownInput("input_ids", tuple(ids.shape), LONG, None, ids),
              KnownInput("attention_mask", tuple(ones.shape), LONG, None, ones),
              InputSpec("input_values", (b * feats.shape[0], *feats.shape[1:]), dtype),
              KnownInput(clip.mask_name, tuple(mask.shape), LONG, None, mask),
              KnownInput("labels", tuple(labels.shape), LONG, None, labels),
              KnownInput(DIFFUSION_MASK, tuple(audio.shape), torch.bool, None, audio))
    note = (f"audio: {seconds:g} s per sample -> input_values {list(feats.shape[1:])} -> {per} audio tokens "
            f"after {text_len} transcript tokens (diffusion loss on them)")
    return Batch(inputs, {}, notes=(note,))


__all__ = ["is_diffusion_tts", "tts_batch", "diffusers_missing"]
