"""Regressions found by the held-out run of issue 28: transformers' own PVT config (per-stage head counts) refused by
the config checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memgraph.errors import MemgraphError
from memgraph.model_spec.config_checks import check_fields

REPO = Path(__file__).resolve().parent.parent
PVT = REPO / "tests" / "configs" / "pvt-tiny-224.json"  # transformers 5.23's PvtConfig() (= Zetatech/pvt-tiny-224)


def test_pvt_per_stage_lists_are_accepted():
    raw = json.loads(PVT.read_text())
    assert raw["num_attention_heads"] == [1, 2, 5, 8] and raw["hidden_sizes"] == [64, 128, 320, 512]
    check_fields(raw, "pvt")  # no error: each stage's count is a whole number >= 1


@pytest.mark.parametrize("heads", [[1, 0, 5, 8], [1, 2.5, 5, 8], [1, 2, 5, 1 << 25]])
def test_a_bad_stage_value_is_still_refused_naming_the_list(heads):
    with pytest.raises(MemgraphError) as e:
        check_fields({"num_attention_heads": heads}, "pvt")
    assert f"config field 'num_attention_heads' is {heads!r}" in str(e.value)


@pytest.mark.slow  # builds and traces PVT-Tiny (13.2M parameters) on meta: ~10 s
def test_pvt_analyzes_end_to_end():
    from memgraph.api import analyze

    r = analyze(str(PVT), batch_size=1, image_size=224, target="cpu")
    # PVT-Tiny: 13.2M parameters (Wang et al. 2021, Table 2); transformers builds 13,229,288 with the 1000-class head
    assert r.parameters == 13_229_288


# -- ResNet-50's reserved figure -------------------------------------------------------------------------------
# Bisected over the history (resnet-50, batch 256, fp16-mixed, a100-80gb; allocated 11,839,704,576 B throughout):
# reserved 13,201,571,840 B (119 segments) before 07af7f0, 12,341,739,520 B (97) from 07af7f0 ("cuda target: CUDA
# kernel buffers ... cuDNN conv workspaces ... as transients"), 12,222,201,856 B (88) at 7ab276a. The move is the
# cuDNN workspaces: torch 2.13's Conv_v8.cpp run_conv_plan allocates each workspace from the caching allocator
# and frees it when the convolution returns, so later activations reuse (split) the cached workspace blocks
# instead of new segments. The test replays the same trace with those transient blocks taken out.

def _without(log, bounds, prefix: str):
    """The event log without the events of storages named ``prefix...``, and the iteration bounds moved with it."""
    import bisect
    from dataclasses import replace

    keep = [i for i, (_, sid) in enumerate(log.events) if not log.storages[sid].name.startswith(prefix)]
    moved = [(bisect.bisect_left(keep, a), bisect.bisect_left(keep, b)) for a, b in bounds]
    return replace(log, events=[log.events[i] for i in keep]), moved


@pytest.mark.slow  # traces ResNet-50 at batch 256 (about a minute)
def test_resnet50_reserved_moved_by_the_cudnn_workspaces():
    from memgraph.allocator.replay import device_peaks
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.model_spec.sources import resolve
    from memgraph.trace.tracer import trace_training

    t = trace_training(resolve("resnet-50"), TrainingOptions(batch_size=256, precision="fp16-mixed", gpu="a100-80gb"))
    assert any(s.name.startswith("cuDNN workspace") for s in t.log.storages)
    with_ws = device_peaks(t.log, t.iteration_bounds, "a100-80gb", None)
    without_ws = device_peaks(*_without(t.log, t.iteration_bounds, "cuDNN"), "a100-80gb", None)
    # measured on this trace (torch 2.13 CPU build, transformers 5.23): 12,222,201,856 B in 88 segments with the
    # workspaces, 12,979,273,728 B in 110 without: the cached workspace blocks save 22 segments (757 MB)
    assert (with_ws.steady_state_reserved, with_ws.segments) == (12_222_201_856, 88)
    assert (without_ws.steady_state_reserved, without_ws.segments) == (12_979_273_728, 110)
