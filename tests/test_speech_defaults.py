"""Whisper's decoder length: the limit is the config's max_target_positions, the default 225 tokens or that limit if
smaller (tests/test_whisper_target_len.py has a 448-position decoder)."""

import pytest

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS

WHISPER = str(CONFIGS / "tiny-whisper.json")  # max_target_positions 64, max_source_positions 50


def _labels(**kw):
    batch = resolve(WHISPER).batch(TrainingOptions(target="cpu", audio_seconds=1.0, **kw), None)
    return next(s for s in batch.inputs if s.name == "labels")


def test_default_target_length_is_the_configs_decoder_positions():
    # a config file has no zoo defaults: min(225, the 64 decoder positions of tiny-whisper)
    assert _labels().shape == (1, 64)


def test_a_target_length_past_the_decoder_positions_is_refused_with_the_limit():
    with pytest.raises(MemgraphError, match=r"target length 65 exceeds .* 64 decoder positions .* --target-len 64"):
        _labels(target_len=65)


@pytest.mark.parametrize("name", ["whisper-small", "whisper-large-v3"])
def test_the_zoo_whispers_take_a_typical_transcript_too(name):
    """What a user runs (`memgraph analyze whisper-small`): the zoo entry's own default is the typical transcript of
    tasks.py, 225 tokens, below its 448 decoder positions (it named 448, the limit, which took precedence)."""
    spec = resolve(name)
    assert spec.config.max_target_positions == 448
    labels = next(s for s in spec.batch(TrainingOptions(target="cpu"), None).inputs if s.name == "labels")
    assert labels.shape == (1, 225)  # WHISPER_TARGET_LEN (memgraph/model_spec/tasks.py), 30 s of audio by the zoo
