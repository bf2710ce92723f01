"""Whisper's default label length is a typical transcript (225 tokens: Hugging Face's Whisper fine-tuning recipes'
``--generation_max_length``, memgraph/model_spec/tasks.py WHISPER_TARGET_LEN), not the decoder's 448-position limit."""

import json
from pathlib import Path

import pytest

from memgraph.api import analyze
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions

TINY = Path(__file__).parent / "configs" / "tiny-whisper.json"  # max_source_positions 50: 100 frames = 1 s


def _whisper(tmp_path, positions: int) -> str:
    config = json.loads(TINY.read_text())
    config["max_target_positions"] = positions  # openai/whisper-*: 448 (WhisperConfig's default)
    path = tmp_path / f"whisper-{positions}.json"
    path.write_text(json.dumps(config))
    return str(path)


def _labels(r) -> str:
    return next(b for b in r.batch if b.startswith("labels"))


def test_default_target_is_a_typical_transcript_not_the_limit(tmp_path):
    r = analyze(_whisper(tmp_path, 448), TrainingOptions(target="cpu", audio_seconds=1.0))
    assert _labels(r) == "labels=int64[1,225]"


def test_the_limit_still_holds(tmp_path):
    path = _whisper(tmp_path, 448)
    assert "labels=int64[1,448]" == _labels(analyze(path, TrainingOptions(target="cpu", audio_seconds=1.0, target_len=448)))
    with pytest.raises(MemgraphError, match="target length 449 exceeds this Whisper model's 448"):
        analyze(path, TrainingOptions(target="cpu", audio_seconds=1.0, target_len=449))
