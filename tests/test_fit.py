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


@pytest.mark.slow  # dozens of analyses of a tiny model at large batches
def test_whole_fit_on_a_small_gpu():
    from memgraph.fit import fit

    r = fit(TINY, TrainingOptions(seq_len=256, gpu="t4"))
    assert r.yours.fits_with_margin and r.largest and r.largest > 1
    # the answer is confirmed by real traces: it fits, one more does not
    at, above = r.confirmations
    assert at.fits_with_margin and not above.fits_with_margin
    assert (at.options.batch_size, above.options.batch_size) == (r.largest, r.largest + 1)
    assert all(o.device_total for o in r.changes)  # every change analysed for real


@pytest.mark.slow  # one analysis per candidate change, then three again through the API
def test_each_advice_entry_equals_an_analyze_with_that_change():
    from memgraph.api import analyze
    from memgraph.fit.analyses import Analyses
    from memgraph.fit.candidates import try_changes
    from memgraph.fit.progress import QUIET
    from memgraph.model_spec.defaults import resolve_defaults
    from memgraph.model_spec.sources import resolve

    spec = resolve(TINY)
    opts = resolve_defaults(spec, TrainingOptions(seq_len=32, gpu="t4")).options
    analyses = Analyses(spec)
    yours = analyses.outcome(opts, "your settings")
    changes = try_changes(analyses, opts, yours, QUIET)
    assert len(changes) >= 6
    replayed = [o for o in changes if o.how.startswith("replayed")]
    assert [o.label for o in replayed] == ["expandable segments"]  # the allocator-only change reuses the trace
    for entry in changes[:3] + replayed:
        direct = analyze(TINY, entry.options)
        assert (entry.device_total, entry.device_total_upper) == (direct.required_bytes, direct.required_bytes_upper)
