"""--audio-seconds for audio-language models (task audio-text-to-text, model_spec/audio_text_inputs.py): the
features their processors make and the audio tokens the models scatter, counted by hand; the tiny models'
predictions against the real CPU step."""

import pytest
import torch

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.audio_text_inputs import audio_clip, thinker_audio_clip
from memgraph.model_spec.inputs import IGNORE_INDEX
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS, needs_audio_processors

pytestmark = needs_audio_processors

QWEN2_AUDIO = str(CONFIGS / "tiny-qwen2-audio.json")
VOXTRAL = str(CONFIGS / "tiny-voxtral.json")


def _batch(path, **kw):
    spec = resolve(path)
    assert spec.task == "audio-text-to-text"
    return spec, {s.name: s for s in spec.batch(TrainingOptions(target="cpu", **kw), torch.float32).inputs}


def test_qwen2_audio_tokens_by_hand():
    spec, b = _batch(QWEN2_AUDIO, seq_len=300, audio_seconds=10, batch_size=2)
    # WhisperFeatureExtractor padded to 30 s (padding="max_length"): 480,000 samples / hop 160 = 3,000 frames of
    # 128 mel bins; the mask keeps 10 s = 160,000 / 160 = 1,000 frames; tokens (1000 - 1) // 2 + 1 = 500,
    # (500 - 2) // 2 + 1 = 250
    assert b["input_features"].shape == (2, 128, 3000)
    mask = b["feature_attention_mask"].value()
    assert mask.shape == (2, 3000) and mask.sum(-1).tolist() == [1000, 1000]
    ids = b["input_ids"].value()
    audio = ids == spec.config.audio_token_index
    assert audio.sum(-1).tolist() == [250, 250]
    assert (b["labels"].value()[audio] == IGNORE_INDEX).all()
    # 45 s is truncated to the extractor's 30 s: 3,000 frames -> 1,500 -> 750 tokens
    assert audio_clip(spec.config, 45).tokens == 750


def test_voxtral_tokens_by_hand():
    spec, b = _batch(VOXTRAL, seq_len=800, audio_seconds=45, batch_size=2)
    # 45 s padded to a multiple of 30 s (pad_to_multiple_of=480000 samples): 60 s = 6,000 frames, two chunks of
    # 3,000 stacked along the batch (2 samples x 2 chunks); the encoder halves each chunk to 1,500 positions of
    # d_model 32, reshaped to rows of intermediate_size 128: 1500 * 32 / 128 = 375 per chunk, 750 per sample
    assert b["input_features"].shape == (4, 128, 3000)
    assert "feature_attention_mask" not in b
    assert (b["input_ids"].value() == 24).sum(-1).tolist() == [750, 750]
    assert audio_clip(spec.config, 10).tokens == 375  # one chunk


def test_short_seq_len_names_the_fix():
    with pytest.raises(MemgraphError, match=r"--seq-len 100 cannot hold 10 s of audio \(375 audio tokens.*--seq-len 377"):
        _batch(VOXTRAL, seq_len=100, audio_seconds=10)
    with pytest.raises(MemgraphError, match="pass --audio-seconds"):
        _batch(VOXTRAL, seq_len=100)


@pytest.mark.slow
@pytest.mark.parametrize("path, seconds, seq", [(QWEN2_AUDIO, 10, 300), (VOXTRAL, 10, 400)])
def test_an_audio_step_matches_the_real_cpu_step(path, seconds, seq):
    # measured 2026-11-27 (torch 2.13.0 CPU): Qwen2-Audio predicted 30,786,055 B, real 30,817,271 B (-0.10%);
    # Voxtral predicted 13,950,244 B, real 13,959,860 B (-0.07%); the band is the project's 1%
    opts = TrainingOptions(seq_len=seq, audio_seconds=seconds, batch_size=1, target="cpu")
    real = max(it["peak_allocated"] for it in measure(path, "cpu", opts)["iterations"][1:])
    predicted = analyze(path, opts).steady_state_peak.bytes
    assert abs(predicted - real) <= 0.01 * real


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["glmasr", "qwen3_asr", "moss_transcribe_diarize"])
def test_tiny_audio_language_architecture_within_one_percent(model_type):
    """The coverage sweep's tiny config (tools/coverage.py) of the other families whose processor makes their audio
    inputs; measured 2026-11-27: glmasr -0.253%, qwen3_asr -0.002%, moss_transcribe_diarize -0.252% (1%: the
    sweep's tolerance)."""
    from tools.coverage import architectures, run_one

    (row,) = [run_one(*a) for a in architectures(["audio-text-to-text"], model_type)]
    assert row.runs_for_real and row.analyzes, row.reason
    assert abs(row.error_pct) <= 1.0, row


def test_glm_asr_tokens_by_hand():
    from tools.coverage import tiny_config

    clip = audio_clip(tiny_config("glmasr"), 45)
    # processing_glmasr.py: 45 s in 30 s windows -> two clips, each padded to 3,000 frames, the mask keeping 3,000 and
    # 1,500; lengths summed per sample, 4,500 -> conv (k3, s1, p1) 4,500 -> conv (k3, s2, p1) (4500 + 2 - 2 - 1) // 2
    # + 1 = 2,250 -> merge by 4: (2250 - 4) // 4 + 1 = 562 tokens
    assert clip.features.shape[0] == 2 and clip.mask_name == "input_features_mask"
    assert clip.mask.sum(-1).tolist() == [3000, 1500]
    assert clip.tokens == 562


OMNI = str(CONFIGS / "tiny-qwen2.5-omni-thinker.json")  # vision_start_token_id: get_rope_index reads it


def test_an_omni_thinker_takes_audio_beside_its_image():
    spec = resolve(OMNI)
    assert spec.task == "image-text-to-text"
    b = {s.name: s for s in spec.batch(TrainingOptions(seq_len=400, image_size=56, audio_seconds=10, target="cpu",
                                                       batch_size=2), torch.float32).inputs}
    # Qwen2.5-Omni's processor pads to 30 s (padding="max_length"): 3,000 frames, 1,000 kept for 10 s;
    # (1000 - 1) // 2 + 1 = 500, (500 - 2) // 2 + 1 = 250 audio tokens between audio_start and audio_end
    assert b["input_features"].shape == (2, 128, 3000)
    assert b["feature_attention_mask"].value().sum(-1).tolist() == [1000, 1000]
    ids = b["input_ids"].value()
    assert (ids == 990).sum(-1).tolist() == [250, 250]
    start = int((ids[0] == 993).nonzero()[0])
    assert ids[0, start + 251] == 994 and (b["labels"].value()[0, start:start + 252] == IGNORE_INDEX).all()
    # 56 px: a 4x4 patch grid merged 2x2, 4 image tokens
    assert (ids == 991).sum(-1).tolist() == [4, 4]


def test_audio_seconds_on_a_model_without_audio_is_refused():
    with pytest.raises(MemgraphError, match="takes no audio input: drop --audio-seconds"):
        resolve(str(CONFIGS / "tiny-qwen2-vl.json")).batch(
            TrainingOptions(seq_len=400, image_size=56, audio_seconds=10, target="cpu"), torch.float32)


@pytest.mark.slow
def test_an_omni_thinker_step_matches_the_real_cpu_step():
    # measured 2026-11-27 (torch 2.13.0 CPU): predicted 17,042,004 B, real 17,078,836 B (-0.22%); 1% band
    opts = TrainingOptions(seq_len=400, image_size=56, audio_seconds=10, batch_size=1, target="cpu")
    real = max(it["peak_allocated"] for it in measure(OMNI, "cpu", opts)["iterations"][1:])
    predicted = analyze(OMNI, opts).steady_state_peak.bytes
    assert abs(predicted - real) <= 0.01 * real


@pytest.mark.slow
def test_a_qwen3_omni_thinker_step_with_audio_matches_the_real_cpu_step():
    """The coverage sweep's tiny Qwen3-Omni thinker (MoE text model) with one 56-px image and 1 s of audio (13 audio
    tokens: 100 frames, one window of n_window * 2 = 100 -> 13); measured 2026-11-27: -0.004%; 1% band."""
    from memgraph.api import analyze_spec
    from memgraph.measure import run_measurement
    from memgraph.model_spec.sources import ModelSpec
    from tools.coverage import tiny_config

    def spec():
        return ModelSpec(name="qwen3-omni-thinker", source="config", task="image-text-to-text",
                         config=tiny_config("qwen3_omni_moe_thinker"),
                         model_class="Qwen3OmniMoeThinkerForConditionalGeneration")

    opts = TrainingOptions(seq_len=120, image_size=56, batch_size=1, target="cpu", audio_seconds=1, optimizer="adamw")
    assert thinker_audio_clip(spec().config, 1).tokens == 13
    real = max(it["peak_allocated"] for it in run_measurement(spec(), opts, "cpu")["iterations"][1:])
    predicted = analyze_spec(spec(), opts)[0].steady_state_peak.bytes
    assert abs(predicted - real) <= 0.01 * real
