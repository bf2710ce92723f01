"""The validated error band (memgraph/validation/band.py): its arithmetic by hand, the figures a cuda result carries,
fits_with_margin on the higher upper end, the kinds of model, and the stored band rows in step with the published
rows' recorded errors (tests/published_errors.json)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from memgraph.analysis.device import DevicePeaks
from memgraph.analysis.result import Result
from memgraph.validation.band import MIN_ROWS, BandRow, add_validated_band, band, stored_rows, validated_figures
from memgraph.validation.published import load_rows

REPO = Path(__file__).resolve().parent.parent
GB = 10**9


def _rows(counter: str, kind: str, pairs, source="s") -> list[BandRow]:
    return [BandRow(f"{source}/{i}.json", source, counter, kind, measured, predicted)
            for i, (measured, predicted) in enumerate(pairs)]


# five decoder rows: real / predicted - 1 = +10%, -5%, 0%, +2%, -1%
DECODER = _rows("allocated", "decoder LM", [(110, 100), (95, 100), (200, 200), (102, 100), (99, 100)])


def test_band_is_the_lowest_and_highest_real_over_predicted():
    b = band(DECODER, "allocated", "decoder LM")
    assert (b.scope, b.rows) == ("decoder LM", 5)
    assert (b.low_pct, b.high_pct) == (pytest.approx(-5.0), pytest.approx(10.0))
    assert b.upper(1000) == 1100  # 1000 x (1 + 10%)
    assert b.upper(1001) == 1102  # ceil(1001 x 1.1 = 1101.1): the upper figure never rounds down
    assert "on 5 published measurements like this one, the real value was within -5.0% .. +10.0%" in b.sentence()


def test_a_kind_with_too_few_rows_takes_every_kind():
    rows = DECODER + _rows("allocated", "vision conv", [(130, 100)], source="t")  # one conv row: +30%
    b = band(rows, "allocated", "vision conv")
    assert (b.scope, b.rows, b.high_pct) == ("any kind", 6, pytest.approx(30.0))  # 1 < MIN_ROWS = 5 conv rows
    assert "of any kind (under 5 of vision conv)" in b.sentence()
    assert band(rows, "reserved", "decoder LM") is None  # no reserved rows at all
    assert MIN_ROWS == 5


def test_all_over_predicted_gives_no_margin_below_the_prediction():
    rows = _rows("allocated", "text encoder", [(90, 100)] * 5)  # every row -10%
    b = band(rows, "allocated", "text encoder")
    assert b.high_pct == pytest.approx(-10.0) and b.upper(1000) == 1000  # max(high, 0): the prediction itself


# the fields validated_figures and add_validated_band read; the rest of the record zero
DEVICE = DevicePeaks(gpu="h100-80gb", gpu_name="H100", capacity_bytes=80 * GB, allocator_options="",
                     first_iteration_reserved=0, steady_state_reserved=2 * GB, context_bytes=0,
                     steady_state_device_total=3 * GB, headroom_bytes=0, fits=True, oom_event=None, segments=0,
                     cuda_malloc_calls=0, reserved_upper=2 * GB + 64 * 2**20,
                     steady_state_device_total_upper=2 * GB + 64 * 2**20 + 1 * GB + 300 * 2**20, fits_with_margin=True)


def test_counters_without_a_band_take_the_allocated_bands_bytes():
    v = validated_figures("decoder LM", DEVICE, 1_500_000_000, DECODER)
    assert v["allocated_validated_upper"] == 1_650_000_000  # 1.5 GB x 1.10
    # reserved: no reserved rows, so the reserved prediction + the 150 MB the allocated band adds (at least)
    assert v["reserved_validated_upper"] == 2 * GB + 150_000_000
    # device total: that + what today's upper end has above reserved (the context's upper end: 1 GB + 300 MiB)
    assert v["steady_state_device_total_validated_upper"] == 2 * GB + 150_000_000 + 1 * GB + 300 * 2**20
    assert v["bands"]["reserved"] is None and v["bands"]["allocated"]["rows"] == 5


def test_reserved_takes_the_higher_of_its_band_and_the_allocated_bands_bytes():
    reserved_rows = _rows("reserved", "decoder LM", [(90, 100)] * 4 + [(101, 100)], source="r")  # highest +1%
    v = validated_figures("decoder LM", DEVICE, 1_500_000_000, DECODER + reserved_rows)
    # the reserved band alone: 2 GB x 1.01 = 2.02 GB; the allocated band's 150 MB on top of 2 GB is higher
    assert v["reserved_validated_upper"] == max(2_020_000_000, 2 * GB + 150_000_000) == 2_150_000_000
    high = _rows("reserved", "decoder LM", [(90, 100)] * 4 + [(120, 100)], source="r")  # highest +20%
    v = validated_figures("decoder LM", DEVICE, 1_500_000_000, DECODER + high)
    assert v["reserved_validated_upper"] == 2_400_000_000  # 2 GB x 1.2 > 2.15 GB


def test_no_band_at_all_leaves_the_bounded_unknowns():
    v = validated_figures("speech", DEVICE, GB, [])
    assert v["allocated_validated_upper"] is v["reserved_validated_upper"] is None
    assert v["steady_state_device_total_validated_upper"] is None


def _result(capacity: int) -> Result:
    r = Result.__new__(Result)  # only the fields add_validated_band reads and writes
    r.device = replace(DEVICE, capacity_bytes=capacity)
    r.steady_state_peak = type("Peak", (), {"bytes": 1_500_000_000})()
    return r


def test_fits_with_margin_compares_the_higher_upper_end():
    total_v = 2 * GB + 150_000_000 + 1 * GB + 300 * 2**20  # 3,464,572,800 B: above today's upper end
    assert total_v > DEVICE.steady_state_device_total_upper
    r = _result(capacity=total_v)  # exactly at capacity: still fits
    add_validated_band(r, "decoder LM", DECODER)
    assert r.fits_with_margin and r.required_bytes_validated_upper == total_v
    assert r.margin_basis == "validated band and bounded unknowns, the higher"
    r = _result(capacity=total_v - 1)  # one byte short: today's upper end fits, the band's does not
    add_validated_band(r, "decoder LM", DECODER)
    assert not r.fits_with_margin and not r.device["fits_with_margin"]
    r = _result(capacity=total_v - 1)
    add_validated_band(r, "speech", [])  # no rows at all, no band: the bounded unknowns alone decide
    assert r.fits_with_margin and r.margin_basis.startswith("bounded unknowns")


def test_kinds_of_model():
    import torch
    import transformers

    from memgraph.model_spec.sources import resolve
    from memgraph.model_spec.kinds import model_kind

    def kind(config: str) -> str:
        spec = resolve(str(REPO / "tests" / "configs" / config))
        with torch.device("meta"):
            model = getattr(transformers, spec.model_class)(spec.config)
        return model_kind(spec.task, model)

    assert kind("tiny-llama.json") == "decoder LM"
    assert kind("tiny-bert.json") == "text encoder"  # BERT has a masked-LM class
    assert kind("tiny-vit.json") == "vision transformer"
    assert kind("tiny-resnet.json") == "vision conv"
    assert kind("tiny-t5.json") == "encoder-decoder"
    assert kind("tiny-clip.json") == "multimodal"
    # an audio-language model (Qwen2-Audio) is multimodal, not a user's module: it fell to "other" before, and so
    # took the band of the Liger-Kernel single-module rows (-0.2% .. +0.1%) for a 7B model
    assert model_kind("audio-text-to-text", torch.nn.Linear(2, 2)) == "multimodal"
    assert model_kind("custom", torch.nn.Linear(2, 2)) == "other"


def test_stored_band_rows_are_the_recorded_errors():
    """band_data.py (written with the error record by published.write_error_record from one run) holds exactly the
    recorded rows, each with the recorded error: (predicted - measured) / measured, one decimal."""
    recorded = json.loads((REPO / "tests" / "published_errors.json").read_text())
    # rows whose measured code differs from today's (measured_code_differs) keep their recorded error, not a band row
    differs = {r.file for r in load_rows(REPO / "reports" / "published") if r.code_differs}
    recorded = {f: e for f, e in recorded.items() if f not in differs}
    rows = {r.file: r for r in stored_rows()}
    assert set(rows) == set(recorded)
    moved = {f: (recorded[f], round(100 * (r.predicted - r.measured) / r.measured, 1)) for f, r in rows.items()
             if round(100 * (r.predicted - r.measured) / r.measured, 1) != recorded[f]}
    assert not moved


def test_the_device_record_gets_the_band_fields_last_and_only_once_added():
    """The JSON ``device`` record (DevicePeaks.to_dict) keeps the key order of the dict it was before it was typed:
    the replay's figures, then the five band fields appended by add_validated_band; before that they are absent
    (not null). ``unknowns`` and ``reserved_after`` are never in it. Read-only Mapping access gives the same keys."""
    r = _result(capacity=80 * GB)
    before = r.device.to_dict()
    assert "margin_basis" not in before and "unknowns" not in before and "reserved_after" not in before
    assert list(before)[:3] == ["gpu", "gpu_name", "capacity_bytes"] and list(r.device) == list(before)
    add_validated_band(r, "decoder LM", DECODER)
    after = r.device.to_dict()
    assert list(after) == list(before) + ["allocated_validated_upper", "reserved_validated_upper",
                                          "steady_state_device_total_validated_upper", "validated_band",
                                          "margin_basis"]
    assert r.device["margin_basis"] == r.device.get("margin_basis") == after["margin_basis"] == r.margin_basis
    with pytest.raises(KeyError):
        r.device["reserved_after"]
