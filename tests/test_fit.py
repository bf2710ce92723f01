"""memgraph fit: the search for the largest fitting size, the flags of a change, and a whole fit."""

from pathlib import Path

import pytest

from memgraph.fit import CANDIDATES, Candidate, changed_flags, largest_fitting
from memgraph.model_spec.options import TrainingOptions

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")


@pytest.mark.parametrize("start, fits_start, answer", [(1, True, 37), (64, False, 37), (37, True, 37), (38, False, 37)])
def test_largest_fitting_doubles_then_bisects(start, fits_start, answer):
    probed = []

    def fits(n):
        probed.append(n)
        return n <= 37

    assert largest_fitting(fits, start, fits_start, 1 << 16) == answer
    assert len(probed) <= 2 * 7 + 2  # log2 steps up and down, not a linear scan


def test_largest_fitting_none_and_limit():
    assert largest_fitting(lambda n: False, 1, False, 100) == 0
    assert largest_fitting(lambda n: True, 1, True, 100) == 100


def test_changed_flags_by_hand():
    base = TrainingOptions(seq_len=128)
    changed = TrainingOptions(seq_len=128, gradient_checkpointing=True, precision="bf16")
    assert changed_flags(base, changed) == "--precision bf16 --gradient-checkpointing"


def test_candidates_apply_only_when_they_change_something():
    opts = TrainingOptions(seq_len=128, gradient_checkpointing=True)
    ckpt = next(c for c in CANDIDATES if c.name == "gradient checkpointing")
    assert not ckpt.applies_to(opts)
    assert ckpt.applies_to(TrainingOptions(seq_len=128))
    assert not Candidate("no such option", (("no_such_field", 1),), "").applies_to(opts)
    assert not Candidate("bad value", (("optimizer", "no-such-optimizer"),), "").applies_to(opts)
