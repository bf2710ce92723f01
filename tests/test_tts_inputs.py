"""VibeVoice text-to-speech (model_spec/tts_inputs.py): the processor's training layout sized by hand from its
rates, the refusal that names diffusers where it is missing, and the tiny coverage config against the real CPU step
where diffusers is installed."""

import pytest
import torch

from memgraph.model_spec.options import TrainingOptions
from tests.conftest import needs_audio_processors

transformers = pytest.importorskip("transformers")
needs_vibevoice = pytest.mark.skipif(not hasattr(transformers, "VibeVoiceForConditionalGeneration"),
                                     reason=f"transformers {transformers.__version__} has no VibeVoice")


def _batch(monkeypatch, diffusers: bool, **kw):
    import transformers.utils

    from memgraph.model_spec.sources import ModelSpec
    from tools.coverage import tiny_config

    monkeypatch.setattr(transformers.utils, "is_diffusers_available", lambda: diffusers)
    cfg = tiny_config("vibevoice")
    spec = ModelSpec(name="vibevoice", source="config", task="speech-seq2seq", config=cfg)
    opts = TrainingOptions(target="cpu", **kw)
    return cfg, {s.name: s for s in spec.batch(opts, torch.float32).inputs}


@needs_audio_processors  # VibeVoiceProcessor's class-level audio_kwargs (sampling_rate 24000)
@needs_vibevoice
def test_vibevoice_training_layout_by_hand(monkeypatch):
    cfg, b = _batch(monkeypatch, True, batch_size=2, audio_seconds=2.5, target_len=8)
    # 2.5 s at 24 kHz = 60,000 samples, padded to a multiple of pad_to_multiple_of 3,200: 19 * 3,200 = 60,800;
    # audio tokens ceil(60,000 / 3,200) = ceil(18.75) = 19
    assert b["input_values"].shape == (2, 1, 60800)
    mask = b["padding_mask"].value()
    assert mask.shape == (2, 60800) and mask.sum(-1).tolist() == [60000, 60000]
    # 8 transcript tokens, audio BOS, 19 audio tokens, audio EOS, EOS: 8 + 1 + 19 + 1 + 1 = 30
    ids, labels = b["input_ids"].value(), b["labels"].value()
    acoustic = b["acoustic_loss_mask"].value()
    assert ids.shape == labels.shape == acoustic.shape == (2, 30)
    assert (ids[:, 8] == cfg.audio_bos_token_id).all() and (ids[:, 28] == cfg.audio_eos_token_id).all()
    assert (ids[:, 29] == cfg.eos_token_id).all()
    assert (ids[:, 9:28] == cfg.audio_token_id).all() and int((ids == cfg.audio_token_id).sum()) == 2 * 19
    # the processor's output_labels: audio tokens -100 (and only they), the diffusion loss exactly there
    assert acoustic.dtype == torch.bool and acoustic.sum(-1).tolist() == [19, 19]
    assert ((labels == -100) == acoustic).all() and (labels[~acoustic] == ids[~acoustic]).all()


@needs_audio_processors
@needs_vibevoice
def test_vibevoice_without_diffusers_names_it(monkeypatch):
    from memgraph.model_spec.speech_inputs import NoSpeechLayout

    with pytest.raises(NoSpeechLayout, match="diffusion loss needs diffusers .* pip install diffusers"):
        _batch(monkeypatch, False, batch_size=1, audio_seconds=1, target_len=8)


@pytest.mark.slow
@needs_audio_processors
@needs_vibevoice
def test_tiny_vibevoice_within_one_percent(monkeypatch):
    """The coverage sweep's tiny config against the real CPU step (1%: the sweep's tolerance), where diffusers is
    installed (memgraph does not install it)."""
    pytest.importorskip("diffusers")
    import tools.coverage
    from tools.coverage import run_one

    monkeypatch.setattr(tools.coverage, "PER_MODEL_SECONDS", 600)
    row = run_one("speech-seq2seq", "vibevoice", "VibeVoiceForConditionalGeneration")
    assert row.runs_for_real and row.analyzes, row.reason
    assert abs(row.error_pct) <= 1.0, row
