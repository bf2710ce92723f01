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
