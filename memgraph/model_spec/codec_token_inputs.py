"""Inputs of speech models that take audio as codec tokens, not as features: Kyutai speech-to-text, Dia.

``KyutaiSpeechToTextForConditionalGeneration`` (transformers 5.23) trains on one stream per position of a text
token and ``num_codebooks`` Mimi codec tokens: ``input_ids [batch, frames, 1 + num_codebooks]``
(``KyutaiSpeechToTextEmbeddings`` offsets each codebook's ids past the text vocabulary and sums the embeddings),
``labels [batch, frames]`` text tokens. Its generation turns ``input_values`` into the codec stream itself; a
training step takes the codes. Per sample, ``--audio-seconds`` of audio:

- the waveform exactly as ``KyutaiSpeechToTextFeatureExtractor`` (the extractor transformers names) pads it, with its
  defaults (``audio_silence_prefix_seconds`` before, ``audio_delay_seconds`` + 1 s after);
- ``frames`` = the codec model's own ``get_encoded_length`` of those samples (``MimiModel``: its encoder's
  convolutions and downsampling, 12.5 frames per second), built on the CPU from the config's ``codec_config``
  without its transformer layers (they keep the length);
- ids: text ids below ``vocab_size`` in stream 0, codec ids below ``codebook_vocab_size`` in the others
  (never the audio padding id); labels the text stream.

``DiaForConditionalGeneration`` (text-to-speech) trains as ``DiaProcessor(text, audio, generation=False,
output_labels=True)`` lays it out: ``input_ids [batch, --target-len]`` transcript bytes for the encoder;
``decoder_input_ids [batch, frames, channels]`` the clip's DAC codes between BOS and EOS with the config's
``delay_pattern`` applied (DiaProcessor.build_indices / apply_audio_delay, its public static methods), and ``labels
[batch * channels, frames]`` the next codes (BOS and padding -100). ``frames`` = the clip at the processor's
``audio_kwargs`` sampling rate (44.1 kHz), padded by DiaFeatureExtractor to its ``hop_length`` (512), divided by
the DAC's compression (the product of DacConfig's ``downsampling_ratios``, 2*4*8*8 = 512, the class defaults, as
descript/dac_44khz), plus BOS, EOS and the largest delay, minus the one shift.
"""

from __future__ import annotations

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import Batch
from memgraph.model_spec.multimodal_inputs import KnownInput
from memgraph.model_spec.speech_inputs import NoSpeechLayout, feature_extractor_for

LONG = torch.int64
TONE_HZ, TONE_AMPLITUDE = 440.0, 0.1  # speech_inputs.py's tone: only its length matters
CODEC_MODEL_TYPES = ("kyutai_speech_to_text", "dia")


def is_codec_token_model(cfg) -> bool:
    return getattr(cfg, "model_type", None) in CODEC_MODEL_TYPES


def codec_frames(cfg, seconds: float) -> tuple[int, int]:
    """(samples the extractor makes of one ``seconds`` clip, codec frames the codec model encodes them into)."""
    extractor = feature_extractor_for(cfg)
    if extractor is None:
        raise NoSpeechLayout(f"transformers names no feature extractor for {cfg.model_type}")
    rate = int(extractor.sampling_rate)
    import numpy as np

    t = np.arange(max(1, round(seconds * rate)), dtype=np.float32) / rate
    wave = (TONE_AMPLITUDE * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)
    samples = int(extractor(wave, sampling_rate=rate, return_tensors="pt")["input_values"].shape[-1])
    import copy

    from transformers import AutoModel

    # get_encoded_length reads its convolutions' stride and kernel buffers (values, so not on meta); its
    # transformer layers do not change the length: a CPU copy without them
    codec_cfg = copy.deepcopy(cfg.codec_config)
    if isinstance(getattr(codec_cfg, "num_hidden_layers", None), int):
        codec_cfg.num_hidden_layers = 0
    with torch.device("cpu"):
        codec = AutoModel.from_config(codec_cfg)
    frames = int(codec.get_encoded_length(torch.tensor([samples]))[0])
    return samples, frames


def codec_token_batch(cfg, opts, defaults: dict, dtype: torch.dtype) -> Batch:
    """Batch for a codec-token speech model (see the module docstring)."""
    seconds = opts.audio_seconds or defaults.get("audio_seconds")
    if seconds is None:
        raise MemgraphError("no default audio length for this model: pass --audio-seconds")
    if cfg.model_type == "dia":
        return _dia_batch(cfg, opts, defaults, seconds)
    samples, frames = codec_frames(cfg, seconds)
    b, books = opts.batch_size, int(cfg.num_codebooks)
    g = torch.Generator().manual_seed(0)
    text = torch.randint(0, int(cfg.vocab_size), (b, frames, 1), generator=g)
    codes = torch.randint(0, int(cfg.codebook_vocab_size), (b, frames, books), generator=g)
    pad = getattr(cfg, "audio_pad_token_id", None)
    if isinstance(pad, int):  # the padding id is not offset into a codebook's rows: never draw it
        text[text == pad] = (pad + 1) % int(cfg.vocab_size)
        codes[codes == pad] = (pad + 1) % int(cfg.codebook_vocab_size)
    ids = torch.cat([text, codes], dim=2)
    labels = text[..., 0].clone()
    note = (f"audio: {seconds:g} s per sample -> {samples} samples after the extractor's padding -> {frames} codec "
            f"frames of {books} codebooks, one text token each")
    return Batch((KnownInput("input_ids", tuple(ids.shape), LONG, None, ids),
                  KnownInput("labels", tuple(labels.shape), LONG, None, labels)), {}, notes=(note,))


def dia_frames(seconds: float) -> int:
    """DAC frames of one ``seconds`` clip as DiaProcessor._process_audio counts them (before BOS, EOS and delay)."""
    import math

    from memgraph.private_api import unavailable

    too_old = unavailable("transformers_audio_processors")  # DiaProcessor's class-level audio_kwargs
    if too_old:
        raise NoSpeechLayout(f"{too_old}, or describe the inputs with --input")
    from transformers import DacConfig, DiaFeatureExtractor, DiaProcessor

    rate = int(DiaProcessor.audio_kwargs["sampling_rate"])
    extractor = DiaFeatureExtractor(sampling_rate=rate)
    import numpy as np

    t = np.arange(max(1, round(seconds * rate)), dtype=np.float32) / rate
    wave = (TONE_AMPLITUDE * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)
    made = extractor(wave, sampling_rate=rate, return_tensors="pt")
    hop = extractor.hop_length
    valid = math.ceil(int(made["padding_mask"][0].sum()) / hop) * hop
    return valid // math.prod(DacConfig().downsampling_ratios)


def _dia_batch(cfg, opts, defaults: dict, seconds: float) -> Batch:
    from transformers import DiaProcessor

    text_len = opts.target_len or defaults.get("target_len")
    if text_len is None:
        raise MemgraphError("no default transcript length for this model: pass --target-len")
    dec = cfg.decoder_config
    bos, pad, eos = int(dec.bos_token_id), int(dec.pad_token_id), int(dec.eos_token_id)
    delay = list(cfg.delay_pattern)
    b, channels, frames = opts.batch_size, int(dec.num_channels), dia_frames(seconds)
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, min(bos, pad, eos), (b, frames, channels), generator=g)
    codes = torch.nn.functional.pad(codes, (0, 0, 0, 1, 0, 0), value=eos)  # training: EOS after the clip
    codes = torch.nn.functional.pad(codes, (0, 0, 1, 0, 0, 0), value=bos)  # BOS before it
    length = frames + 2 + max(delay)
    prefill = torch.full((b, length, channels), pad, dtype=torch.long)
    prefill[:, :length - max(delay)] = codes
    idx = DiaProcessor.build_indices(bsz=b, seq_len=length, num_channels=channels, delay_pattern=delay, revert=False)
    delayed = DiaProcessor.apply_audio_delay(audio=prefill, pad_token_id=pad, bos_token_id=bos, precomputed_idx=idx)
    labels = delayed.clone()[:, 1:]
    labels[(labels == pad) | (labels == bos)] = -100
    labels = labels.transpose(1, 2).reshape(b * channels, -1).contiguous().long()
    dec_ids = delayed[:, :-1].long()
    text = torch.randint(0, int(cfg.encoder_config.vocab_size), (b, text_len), generator=g)
    note = (f"audio: {seconds:g} s per sample -> {frames} DAC frames x {channels} channels -> {dec_ids.shape[1]} "
            f"decoder positions (BOS, EOS and the delay pattern's {max(delay)})")
    return Batch((KnownInput("input_ids", tuple(text.shape), LONG, None, text),
                  KnownInput("decoder_input_ids", tuple(dec_ids.shape), LONG, None, dec_ids),
                  KnownInput("labels", tuple(labels.shape), LONG, None, labels)), {}, notes=(note,))


__all__ = ["is_codec_token_model", "codec_token_batch", "codec_frames"]
