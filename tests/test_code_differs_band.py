"""Published rows whose measured run executed code today's stack no longer runs (``measured_code_differs``): loaded
with the field, kept in the report with their error, left out of the validated band's rows (band_data.py, the
report's band and its exceed counts); a row without the field stays in."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from memgraph.errors import MemgraphError
from memgraph.validation import band_report
from memgraph.validation.band import band, write_band_data
from memgraph.validation.published import Evaluation, load_row, load_rows, render_markdown

REPO = Path(__file__).resolve().parent.parent
DIFFERS = {"mechanism": "the old attention clamped its scores with torch.max, which keeps its input",
           "versions": "transformers 4.46.3", "record": "reports/published/old-code-probe.json"}


def _data(**extra) -> dict:
    return {"kind": "memgraph.published", "source": {"name": "a table", "url": "https://example.org", "quote": "q"},
            "counter": "allocated", "counter_reason": "max_memory_allocated", "measured": {"value": 1.5, "unit": "GB"},
            "gpu": "NVIDIA L40S", "model": "models/published/opt-350m.json", "options": ["-b", "1"], **extra}


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "published"
    (root / "src").mkdir(parents=True)
    (root / "src" / "old.json").write_text(json.dumps(_data(measured_code_differs=DIFFERS)))
    for i in range(5):  # five rows without the field: real / predicted - 1 = 0%, +1%, ..., +4%
        (root / "src" / f"new{i}.json").write_text(json.dumps(_data(measured={"value": 100 + i, "unit": "MB"})))
    return root


def _evaluations(root: Path) -> list[Evaluation]:
    # the old row: 1.5 GB measured, 1.0 GB predicted (+50%); the others: 100 MB predicted each
    return [Evaluation(r, "evaluable", predicted=10**9 if r.code_differs else 10**8, upper=None, kind="decoder LM")
            for r in load_rows(root)]


def test_the_field_is_read_as_one_line_and_a_row_without_it_has_none(tmp_path):
    root = _folder(tmp_path)
    old, new = load_row(root / "src" / "old.json", root), load_row(root / "src" / "new0.json", root)
    assert old.code_differs == ("the old attention clamped its scores with torch.max, which keeps its input; "
                                "transformers 4.46.3; reports/published/old-code-probe.json")
    assert new.code_differs is None


@pytest.mark.parametrize("value", ["a string", {"mechanism": "m", "versions": "v"}, {**DIFFERS, "record": ""}])
def test_a_malformed_field_is_one_clear_error(tmp_path, value):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_data(measured_code_differs=value)))
    with pytest.raises(MemgraphError, match="r.json: field 'measured_code_differs' must be an object with the "
                                            "strings mechanism, versions, record"):
        load_row(path, tmp_path)


def test_band_data_leaves_out_the_row_with_the_field_and_keeps_the_others(tmp_path):
    evaluations = _evaluations(_folder(tmp_path))
    out = tmp_path / "band_data.py"
    write_band_data(evaluations, path=str(out))
    spec = importlib.util.spec_from_file_location("band_data_under_test", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sorted(r[0] for r in module.ROWS) == [f"src/new{i}.json" for i in range(5)]


def test_the_reports_band_and_counts_leave_it_out_and_its_error_stays_in_the_table(tmp_path):
    root = _folder(tmp_path)
    evaluations = _evaluations(root)
    rows = band_report.band_rows(evaluations)
    assert len(rows) == 5 and "src/old.json" not in {r.file for r in rows}
    b = band(rows, "allocated", "decoder LM")
    # highest real / predicted - 1 over the five: 104 MB / 100 MB - 1 = +4% (with the old row it would be +50%)
    assert (b.rows, round(b.high_pct, 6), round(b.low_pct, 6)) == (5, 4.0, 0.0)
    assert {m["file"] for m in band_report.margins(evaluations)} == {f"src/new{i}.json" for i in range(5)}
    text = render_markdown(evaluations, root)
    # the old row's error: (1.0 GB - 1.5 GB) / 1.5 GB = -33.3%, in the predicted rows' table, marked
    assert "-33.3% (measured code differs: not in the band)" in text
    assert "1 predicted rows ran code today's stack no longer runs" in text
