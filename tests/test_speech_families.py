"""Speech and audio-language families added to the input recipes: extractors transformers does not name for the
model type (Moonshine Streaming, MusicFlamingo, SpeechEncoderDecoderModel), extractors that need torchaudio run
with its spectrogram's shape (Granite Speech, Fun-ASR-Nano: model_spec/torchaudio_shapes.py), waveform input
(VibeVoice-ASR) and codec-token models (Kyutai speech-to-text, Dia: model_spec/codec_token_inputs.py). Shapes and
token counts by hand from each extractor's arithmetic; the tiny coverage configs against the real CPU step."""

import pytest
import torch

from memgraph.model_spec.options import TrainingOptions
from tests.conftest import needs_audio_processors

transformers = pytest.importorskip("transformers")


def _needs(class_name):
    return pytest.mark.skipif(not hasattr(transformers, class_name),
                              reason=f"transformers {transformers.__version__} has no {class_name}")


def _batch(model_type, task="speech-seq2seq", **kw):
    from memgraph.model_spec.sources import ModelSpec
    from tools.coverage import tiny_config

    cfg = tiny_config(model_type)
    spec = ModelSpec(name=model_type, source="config", task=task, config=cfg)
    opts = TrainingOptions(target="cpu", batch_size=kw.pop("batch_size", 1), **kw)
    return cfg, {s.name: s for s in spec.batch(opts, torch.float32).inputs}


@needs_audio_processors  # MoonshineStreamingProcessor's class-level audio_kwargs
@_needs("MoonshineStreamingForConditionalGeneration")
def test_moonshine_streaming_pads_the_waveform_to_its_frames():
    # Wav2Vec2FeatureExtractor (Moonshine's) with MoonshineStreamingProcessor's pad_to_multiple_of 80: 1.003 s at
    # 16 kHz = 16,048 samples -> the next multiple of 80, 16,080 (201 encoder frames of 80 samples)
    _, b = _batch("moonshine_streaming", audio_seconds=1.003, target_len=8, batch_size=2)
    assert b["input_values"].shape == (2, 16080)
    assert b["labels"].shape == (2, 8)


@_needs("SpeechEncoderDecoderModel")
def test_speech_encoder_decoder_takes_its_encoders_waveform():
    try:
        transformers.AutoConfig.for_model("speech-encoder-decoder")
    except ValueError:  # transformers 5.6: no default encoder and decoder
        pytest.skip(f"transformers {transformers.__version__} builds no default SpeechEncoderDecoderConfig")
    # the default composite is wav2vec2 + BERT: Wav2Vec2FeatureExtractor makes input_values, 1 s = 16,000 samples
    _, b = _batch("speech-encoder-decoder", audio_seconds=1, target_len=8)
    assert b["input_values"].shape == (1, 16000) and "input_features" not in b


@needs_audio_processors
@_needs("GraniteSpeechForConditionalGeneration")
def test_granite_speech_features_and_tokens_by_hand():
    from memgraph.model_spec.audio_text_inputs import audio_clip
    from tools.coverage import tiny_config

    clip = audio_clip(tiny_config("granite_speech"), 10)
    # MelSpectrogram (center): 160,000 // 160 + 1 = 1,001 frames, the odd last one dropped, stacked in pairs:
    # [500, 2 * 80]; tokens: encoder length 1001 // 2 = 500, ceil(500 / 15) = 34 blocks of 15 // 5 = 3 -> 102
    assert clip.features.shape == (1, 500, 160)
    assert clip.tokens == 102
    assert clip.mask_name == "input_features_mask" and clip.mask.dtype == torch.bool and clip.mask.shape == (1, 102)


@needs_audio_processors
@_needs("FunAsrNanoForConditionalGeneration")
def test_fun_asr_nano_features_by_hand():
    from memgraph.model_spec.audio_text_inputs import audio_clip
    from tools.coverage import tiny_config

    clip = audio_clip(tiny_config("fun_asr_nano"), 10)
    # kaldi fbank, 25 ms frames every 10 ms (snip_edges): 1 + (160,000 - 400) // 160 = 998 frames of 80 bins; LFR
    # stacks 7 every 6: ceil(998 / 6) = 167 rows of 560; one audio token per row
    assert clip.features.shape == (1, 167, 560)
    assert clip.tokens == 167


@needs_audio_processors
@_needs("VibeVoiceAsrForConditionalGeneration")
def test_vibevoice_asr_takes_the_padded_waveform():
    cfg, b = _batch("vibevoice_asr", task="audio-text-to-text", audio_seconds=1, seq_len=24)
    # 1 s at 24 kHz = 24,000 samples, padded to a multiple of the tokenizer hop 3,200: 25,600; tokens
    # ceil(24,000 / 3,200) = 8
    assert b["input_values"].shape == (1, 1, 25600)
    assert b["padding_mask"].shape == (1, 25600)
    assert (b["input_ids"].value() == cfg.audio_token_id).sum() == 8


@_needs("KyutaiSpeechToTextForConditionalGeneration")
def test_kyutai_codec_frames_by_hand():
    cfg, b = _batch("kyutai_speech_to_text", audio_seconds=1, target_len=8)
    # KyutaiSpeechToTextFeatureExtractor pads audio_delay_seconds (0) + 1 s after the clip: 2 s at 24 kHz = 48,000
    # samples; Mimi's 1,920 samples per frame (12.5 Hz): 25 frames, each a text token and 32 codebook tokens
    assert b["input_ids"].shape == (1, 25, 1 + cfg.num_codebooks) and cfg.num_codebooks == 32
    assert b["labels"].shape == (1, 25)
    ids = b["input_ids"].value()
    assert int(ids[..., 0].max()) < cfg.vocab_size and int(ids[..., 1:].max()) < cfg.codebook_vocab_size


@needs_audio_processors  # DiaProcessor's class-level audio_kwargs
@_needs("DiaForConditionalGeneration")
def test_dia_decoder_layout_by_hand():
    cfg, b = _batch("dia", audio_seconds=1, target_len=8)
    # 1 s at 44.1 kHz = 44,100 samples, padded to hop 512: 87 * 512 -> 87 DAC frames (compression 2*4*8*8 = 512);
    # + BOS + EOS + the largest delay 15 = 104 positions, minus the one shift between inputs and labels: 103
    channels = cfg.decoder_config.num_channels
    assert b["decoder_input_ids"].shape == (1, 103, channels)
    assert b["labels"].shape == (channels, 103)
    assert b["input_ids"].shape == (1, 8)
    labels = b["labels"].value()
    # channel 0 has no delay: BOS is the first input, so its labels are the 87 codes and EOS, then padding
    assert (labels[0, :88] >= 0).all() and (labels[0, 88:] == -100).all()


LOADED_MACHINE_SECONDS = 600


@pytest.mark.slow
@pytest.mark.parametrize("task, model_type", [
    ("speech-seq2seq", "moonshine_streaming"), ("speech-seq2seq", "speech-encoder-decoder"),
    ("speech-seq2seq", "granite_speech"), ("speech-seq2seq", "fun_asr_nano"),
    ("speech-seq2seq", "kyutai_speech_to_text"), ("speech-seq2seq", "dia"), ("speech-seq2seq", "vibevoice_asr"),
    ("speech-seq2seq", "pop2piano"),
    ("audio-text-to-text", "musicflamingo"), ("audio-text-to-text", "nemo_speechlm")])
def test_tiny_speech_family_within_one_percent(task, model_type, monkeypatch):
    """The coverage sweep's tiny config of each new family against the real CPU step (1%: the sweep's tolerance);
    reports/coverage.md has the measured errors. The sweep's per-model budget (90 s) is raised: on a loaded
    machine the wav2vec2 and VibeVoice-ASR steps ran past it, which says nothing of the prediction."""
    import tools.coverage
    from tools.coverage import architectures, run_one

    if model_type == "pop2piano":  # its extractor and processor require them (the test extra has them)
        for package in ("essentia", "librosa", "pretty_midi"):
            pytest.importorskip(package)
    monkeypatch.setattr(tools.coverage, "PER_MODEL_SECONDS", LOADED_MACHINE_SECONDS)

    planned = architectures([task], model_type)
    if not planned or not hasattr(transformers, planned[0][2]):
        pytest.skip(f"transformers {transformers.__version__} has no {model_type} of task {task}")
    (row,) = [run_one(*a) for a in planned]
    assert row.runs_for_real and row.analyzes, row.reason
    assert abs(row.error_pct) <= 1.0, row


@_needs("Pop2PianoForConditionalGeneration")
def test_pop2piano_cuts_a_metronome_at_its_beats():
    pytest.importorskip("essentia")
    pytest.importorskip("librosa")
    from memgraph.errors import MemgraphError

    cfg, b = _batch("pop2piano", audio_seconds=4, target_len=8)
    # measured (essentia 2.1b6): 4 s of 120-BPM clicks at 22,050 Hz make one beat-aligned segment of 39 frames,
    # each d_model (the extractor's feature_size, the encoder's width) wide
    assert b["input_features"].shape == (1, 39, cfg.d_model)
    with pytest.raises(MemgraphError, match="found no beats to cut 1 s of audio.*--audio-seconds 4 or more"):
        _batch("pop2piano", audio_seconds=1, target_len=8)
