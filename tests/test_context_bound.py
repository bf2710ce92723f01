"""The CUDA context figure, the upper end of every cuda peak, and the scheduler fields of the JSON report.

Context figures are the catalog's (memgraph/facts/gpus.py cuda_context_for, sources there); the upper end
follows memgraph/allocator/upper_bound.py: allocated + the allocated-counter slacks; reserved from the replay
with one extra block (the slacks rounded up to 2 MiB, at least 10 MiB; 20 MiB pages with expandable
segments) held from the start; device total upper = reserved upper + the context's upper end + other slacks.
Every expected number is worked out beside its assertion.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import memgraph.allocator.replay as replay
import memgraph.api as api
from memgraph.allocator.replay import device_peaks
from memgraph.api import analyze
from memgraph.errors import MemgraphError
from memgraph.facts.gpus import cuda_context_for, get_gpu
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.model_spec.options import TrainingOptions, parse_bytes
from memgraph.render.formats import render
from memgraph.units import human_bytes
from tests.test_device_replay import training_step

MiB = 1 << 20
GiB = 1 << 30


# -- the context figure: three GPU / CUDA / loading combinations -------------------------------------------

def test_h100_default_is_cuda_13_lazy():
    c = cuda_context_for(get_gpu("h100-80gb").compute_capability)
    # sm90+, lazy: 600 MiB expected, 450-900 MiB; the PyPI torch 2.13 wheel is a CUDA 13 build
    assert (c.expected_bytes, c.low_bytes, c.high_bytes) == (600 * MiB, 450 * MiB, 900 * MiB)
    assert (c.arch, c.cuda_major, c.module_loading) == ("sm90", 13, "lazy")
    assert get_gpu("h100-80gb").cuda_context_bytes == c.expected_bytes  # the catalog's default is this figure


def test_a100_cuda_12_eager_adds_every_kernel_image():
    c = cuda_context_for(get_gpu("a100-80gb").compute_capability, 12, "eager")
    # lazy sm80-sm89: 500 (256-750) MiB; eager adds 1 GiB expected, 379,584,512 B at least (PR #86509:
    # 666,632,192 - 287,047,680) and 2 GiB at most
    assert c.expected_bytes == 500 * MiB + 1024 * MiB == 1_598_029_824
    assert c.low_bytes == 256 * MiB + 379_584_512 == 648_019_968
    assert c.high_bytes == 750 * MiB + 2048 * MiB == 2_933_915_648
    assert (c.arch, c.cuda_major, c.module_loading) == ("sm80", 12, "eager")


def test_v100_runs_cuda_12_only():
    c = cuda_context_for(get_gpu("v100-32gb").compute_capability)
    # compute capability 7.0 < 7.5: CUDA 13 cannot run it, so the default is 12; sm70-sm75 lazy: 400 (256-650) MiB
    assert (c.cuda_major, c.expected_bytes, c.low_bytes, c.high_bytes) == (12, 400 * MiB, 256 * MiB, 650 * MiB)
    with pytest.raises(ValueError, match="compute capability 7.0"):
        cuda_context_for((7, 0), 13)
    with pytest.raises(MemgraphError, match="--cuda-version 12"):
        TrainingOptions(gpu="v100-32gb", cuda_version="13")
    assert cuda_context_for((7, 5), 13).cuda_major == 13  # a T4 runs CUDA 13


def test_parse_bytes():
    assert parse_bytes("512MiB") == 512 * MiB
    assert parse_bytes("1.2GiB") == int(1.2 * GiB) == 1_288_490_188
    assert parse_bytes("600MB") == 600_000_000  # decimal units are decimal
    assert parse_bytes("4096") == 4096
    for bad in ("12 parsecs", "-1MiB", "0", "GiB"):
        with pytest.raises(Exception, match="byte count|more than 0"):
            parse_bytes(bad)


# -- the upper end on the hand-made step of tests/test_device_replay.py -------------------------------------
# Expected (test_device_replay): steady reserved 118 MiB, total 118 + 600 = 718 MiB on an H100.

CUDNN = BoundedUnknown("cuDNN algorithm choice (test)", 1 * MiB, 7 * MiB, "test", "allocated")  # slack 6 MiB
FLASH = BoundedUnknown("attention workspace (test)", 0, 3 * MiB, "test", "allocated")  # slack 3 MiB
NCCL = BoundedUnknown("outside the allocator (test)", 0, 5 * MiB, "test", "total")  # slack 5 MiB


def test_upper_end_adds_each_slack_by_hand():
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "", steady_allocated=100 * MiB, unknowns=[CUDNN, FLASH, NCCL])
    assert (d.steady_state_reserved, d.steady_state_device_total) == (118 * MiB, 718 * MiB)  # unchanged
    # allocated: 100 + 6 + 3 = 109 MiB
    assert d.allocated_upper == 109 * MiB
    # the allocated slack 9 MiB -> one block of max(9, 10) MiB rounded to 2 MiB = 10 MiB, its own segment:
    # every later request sees the allocator as before, so reserved = 118 + 10 = 128 MiB
    assert d.unknowns_block_bytes == 10 * MiB
    assert d.reserved_upper == 128 * MiB
    # total: 128 reserved + 600 context + 300 context range + 5 outside the allocator = 1033 MiB
    assert d.context_upper_bytes == 900 * MiB
    assert d.steady_state_device_total_upper == (128 + 600 + 300 + 5) * MiB
    names = [u["name"] for u in d.unknowns]
    assert names == [CUDNN.name, FLASH.name, NCCL.name, "CUDA context range for sm90 (CUDA 13, lazy loading)"]
    assert d.fits and d.fits_with_margin


def test_expandable_segments_round_the_block_to_20_mib_pages():
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "expandable_segments:True", unknowns=[CUDNN])
    # slack 6 MiB -> max(6, 10) = 10 MiB, rounded up to one 20 MiB page that it fills: the rest of the
    # stream maps the same pages 20 MiB further on, so reserved = 122 (test_device_replay) + 20 = 142 MiB
    assert d.unknowns_block_bytes == 20 * MiB
    assert (d.steady_state_reserved, d.reserved_upper) == (122 * MiB, 142 * MiB)


def test_a_large_slack_rounds_to_2_mib():
    s = training_step()
    big = BoundedUnknown("big (test)", 0, 31 * MiB + 1, "test")
    d = device_peaks(s.log, s.bounds, "h100-80gb", "", unknowns=[big])
    # 31 MiB + 1 B -> 32 MiB; reserved 118 + 32 = 150 MiB
    assert (d.unknowns_block_bytes, d.reserved_upper) == (32 * MiB, 150 * MiB)


def test_context_bytes_overrides_the_estimate_and_leaves_the_unknowns():
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "", context_bytes=parse_bytes("512MiB"))
    # total = 118 + 512 = 630 MiB; no unknown left: the upper end is the expected value
    assert (d.context_bytes, d.steady_state_device_total) == (512 * MiB, 630 * MiB)
    assert d.steady_state_device_total_upper == d.steady_state_device_total == 630 * MiB
    assert d.context_upper_bytes == 512 * MiB and d.unknowns == [] and not d.context_estimated
    assert "--context-bytes" in d.context_assumption


def test_eager_loading_moves_both_ends():
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "", module_loading="eager", cuda_version="12")
    # sm90 eager: 600 + 1024 = 1624 MiB expected, 900 + 2048 = 2948 MiB upper
    assert d.steady_state_device_total == (118 + 1624) * MiB
    assert d.steady_state_device_total_upper == (118 + 2948) * MiB
    assert (d.cuda_version, d.module_loading) == (12, "eager")


def _small_h100(monkeypatch, capacity: int):
    small = replace(get_gpu("h100-80gb"), capacity_bytes=capacity)
    monkeypatch.setattr(replay, "get_gpu", lambda key: small)
    return small


def test_fits_but_not_with_margin_between_the_two_ends(monkeypatch):
    _small_h100(monkeypatch, 800 * MiB)  # between 718 MiB (expected) and 1018 MiB (upper)
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "")
    # the replay's budget is 800 - 600 = 200 MiB > 118: no out-of-memory
    assert d.oom_event is None and d.fits and not d.fits_with_margin
    assert d.steady_state_device_total_upper == (118 + 900) * MiB


# -- through the API: a tiny model's report, JSON and table -------------------------------------------------
# mlp-cuda (tests/golden/mlp-cuda.json): allocated 69,222,912 B, reserved 68 MiB, total 668 MiB on an H100.

MLP = ("tests.fixtures.nets:mlp", dict(inputs=("x=float32[4,16]",), target="cuda"))
WORKSPACE = BoundedUnknown("cuDNN algorithm choice (test)", 0, 4 * MiB, "test", "allocated")


@pytest.fixture
def with_workspace_unknown(monkeypatch):
    """The trace meets one kernel-workspace unknown (as sdpa_kernels / cuda_library_workspaces record them)."""
    trace_training = api.trace_training

    def traced(spec, opts):
        trace = trace_training(spec, opts)
        trace.unknowns.append(WORKSPACE)
        return trace

    monkeypatch.setattr(api, "trace_training", traced)


def test_tiny_model_upper_end_by_hand(with_workspace_unknown):
    r = analyze(MLP[0], **MLP[1])
    d = r.device
    assert (r.steady_state_peak.bytes, d["steady_state_reserved"]) == (69_222_912, 68 * MiB)
    assert d["allocated_upper"] == 69_222_912 + 4 * MiB == 73_417_216
    # 4 MiB slack -> a 10 MiB block of its own: 68 + 10 = 78 MiB
    assert d["reserved_upper"] == 78 * MiB
    # required: 68 + 600 = 668 MiB; upper: 78 + 600 + 300 = 978 MiB
    assert (r.required_bytes, r.required_bytes_upper) == (668 * MiB, 978 * MiB)
    assert r.fits is True and r.fits_with_margin is True
    assert [u["name"] for u in r.unknowns] == [WORKSPACE.name, "CUDA context range for sm90 (CUDA 13, lazy loading)"]


def test_json_fields_agree_with_the_table(with_workspace_unknown, monkeypatch):
    _small_h100(monkeypatch, 800 * MiB)  # fits (668 MiB) but not with margin (978 MiB)
    r = analyze(MLP[0], **MLP[1])
    data = json.loads(render(r, "json"))
    assert data["schema_version"] == 5  # 4 and 5 add fields; every field of 3 is unchanged
    assert (data["required_bytes"], data["required_bytes_upper"]) == (668 * MiB, 978 * MiB)
    assert (data["fits"], data["fits_with_margin"]) == (True, False)
    assert data["gpu"] == {"key": "h100-80gb", "name": "NVIDIA H100 80GB HBM3", "capacity_bytes": 800 * MiB}
    assert [set(u) for u in data["unknowns"]] == [{"name", "expected_bytes", "upper_bytes", "source", "counter"}] * 2
    assert [(u["expected_bytes"], u["upper_bytes"]) for u in data["unknowns"]] == [(0, 4 * MiB), (600 * MiB, 900 * MiB)]
    table = render(r, "table")
    assert f"device total  {human_bytes(668 * MiB):>12}  up to {human_bytes(978 * MiB):>12}" in table
    # the terms add up to the interval: 4 (workspace) + 6 (its segment, rounded) + 300 (context) = 310 MiB
    assert ("device total 668.00 MiB, up to 978.00 MiB: cuDNN algorithm choice (test) +4.00 MiB, CUDA context "
            "range for sm90 (CUDA 13, lazy loading) +300.00 MiB, their own allocator segment, rounded up +6.00 MiB"
            in table)
    # the line names the margin fits_with_margin compares: the higher of the unknowns' upper end (978 MiB) and the
    # validated band's device total (validation/band_data.py; 978.36 MiB with the band of 2026-11-27)
    margin = max(978 * MiB, r.device["steady_state_device_total_validated_upper"])
    assert f"fits only if the unknowns stay near their expected values (upper end {human_bytes(margin)} > 800.00 MiB)" in table
    assert "CUDA context: estimated for sm90, CUDA 13, lazy module loading" in table


def test_context_bytes_option_removes_that_unknown():
    r = analyze(MLP[0], **MLP[1], context_bytes=parse_bytes("1.5GiB"))
    # 68 MiB + 1536 MiB; no unknown left, so the upper end equals it
    assert r.required_bytes == r.required_bytes_upper == 68 * MiB + 1536 * MiB
    assert r.unknowns == [] and r.fits_with_margin
    assert "CUDA context: given by --context-bytes (1,610,612,736 B)" in render(r, "table")


def test_cpu_target_has_no_interval():
    r = analyze(MLP[0], **{**MLP[1], "target": "cpu"})
    assert r.required_bytes is None and r.fits is None and r.unknowns == []
    assert "up to" not in render(r, "table")


def test_near_capacity_the_interval_names_the_segments_the_capped_replay_released(monkeypatch):
    """The step of test_device_replay.test_steady_state_counts_the_reserved_bytes_at_its_start: with 60 MiB for
    the allocator and max_split_size_mb:20, the capped replay releases a cached 40 MiB segment; the upper replay
    is not capped and keeps it."""
    from memgraph.render.sections import interval_line
    from tests.test_device_replay import Step
    from memgraph.trace.record.event_log import Origin

    _small_h100(monkeypatch, 660 * MiB)
    s = Step()
    s.phase("setup")
    s.alloc("P", 12 * MiB, Origin.PARAMETER)

    def first(s):
        s.phase("forward")
        s.alloc("W", 40 * MiB)
        s.free("W")

    def second(s):
        s.phase("forward")
        s.alloc("V", 12 * MiB)
        s.free("V")

    s.iterate(first)
    s.iterate(second)
    one_mib = BoundedUnknown("workspace (test)", 0, 1 * MiB, "test")
    d = device_peaks(s.log, s.bounds, "h100-80gb", "max_split_size_mb:20", unknowns=[one_mib])
    assert d.steady_state_reserved == 52 * MiB and d.fits  # test_device_replay's numbers
    # upper replay, uncapped: block 10 MiB, P 12, W 40 (cached, oversize), V 12 may not split W: a new 12 MiB
    # segment -> 10 + 12 + 40 + 12 = 74 MiB
    assert (d.unknowns_block_bytes, d.reserved_upper) == (10 * MiB, 74 * MiB)
    # 1 (slack) + 9 (rounding to the 10 MiB block) + 12 (the segment the capped replay released) = 22 = 74 - 52
    assert interval_line(d, d.unknowns) == (
        "device total 652.00 MiB, up to 974.00 MiB: workspace (test) +1.00 MiB, CUDA context range for sm90 "
        "(CUDA 13, lazy loading) +300.00 MiB, their own allocator segment, rounded up +9.00 MiB, cached segments "
        "the expected replay released near capacity +12.00 MiB")
    assert not d.fits_with_margin  # 974 MiB > 660 MiB


def test_without_unknown_blocks_the_upper_replay_still_keeps_what_the_capped_one_released(monkeypatch):
    """Same step, no allocator unknown: reserved upper is the uncapped replay's 64 MiB (P 12 + W 40 + V 12),
    not the capped 52 MiB, so the upper end never depends on releases near capacity."""
    from tests.test_device_replay import Step
    from memgraph.trace.record.event_log import Origin

    _small_h100(monkeypatch, 660 * MiB)
    s = Step()
    s.phase("setup")
    s.alloc("P", 12 * MiB, Origin.PARAMETER)
    s.iterate(lambda s: (s.phase("forward"), s.alloc("W", 40 * MiB), s.free("W")))
    s.iterate(lambda s: (s.phase("forward"), s.alloc("V", 12 * MiB), s.free("V")))
    d = device_peaks(s.log, s.bounds, "h100-80gb", "max_split_size_mb:20")
    assert (d.steady_state_reserved, d.unknowns_block_bytes, d.reserved_upper) == (52 * MiB, 0, 64 * MiB)
    assert d.steady_state_device_total_upper == (64 + 900) * MiB


def test_the_traces_own_unknowns_reach_the_upper_end():
    """A convolution in bf16-mixed: the trace records cuDNN's workspace as a bounded unknown
    (facts/cudnn_conv.py); the upper end adds its slack as the rules above say."""
    from memgraph.allocator.upper_bound import phantom_bytes
    from memgraph.facts.cuda_allocator import AllocatorOptions

    r = analyze("tests/configs/tiny-resnet.json", batch_size=2, image_size=32, precision="bf16-mixed")
    d = r.device
    allocated = [u for u in r.unknowns if u["counter"] == "allocated"]
    assert any(u["name"].startswith("cuDNN convolution workspace") for u in allocated)
    slack = sum(u["upper_bytes"] - u["expected_bytes"] for u in allocated)
    assert slack > 0 and d["allocated_upper"] == r.steady_state_peak.bytes + slack
    # one block of max(slack, 10 MiB) rounded to 2 MiB, in a segment of its own: reserved rises by exactly it
    assert d["reserved_upper"] == d["steady_state_reserved"] + phantom_bytes(slack, AllocatorOptions())
    assert r.required_bytes_upper == d["reserved_upper"] + 900 * MiB  # + the sm90 context's upper end
