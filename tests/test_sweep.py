"""Batch-size sweeps (memgraph/sweep.py): every swept size equals a separate analysis at that size.

The sweep traces the smallest and the largest batch size and interpolates every storage's size for
the sizes in between; these tests compare each swept size's peaks (allocated, reserved, by category,
top tensors, per phase), static bytes, module rows and timeline with ``memgraph.api.analyze`` run
at that size alone, exactly (no tolerance: both are the same arithmetic over the same stream).
"""

from __future__ import annotations

import functools
import json

import pytest

from memgraph.api import analyze
from memgraph.cli import main, positive_int_list
from memgraph.model_spec.options import TrainingOptions
from memgraph.sweep import analyze_many

LLAMA = "tests/configs/tiny-llama.json"
LLAMA_OPTS = dict(seq_len=16, precision="bf16-mixed", attn_implementation="sdpa", target="cuda")
SIZES = [1, 2, 3, 5, 8]


@functools.lru_cache(maxsize=None)
def _sweep(model: str, sizes: tuple[int, ...], check: bool = False, **opts):
    return analyze_many(model, TrainingOptions(**opts), list(sizes), [opts.get("seq_len")], check=check)


def _same_numbers(swept, alone) -> None:
    assert swept.steady_state_peak == alone.steady_state_peak  # bytes, place, by_category, top tensors
    assert swept.first_iteration_peak == alone.first_iteration_peak
    assert swept.phase_peaks == alone.phase_peaks
    assert swept.device == alone.device  # reserved, device total, segments, cudaMalloc calls
    assert swept.static == alone.static
    assert swept.modules == alone.modules
    assert swept.timeline == alone.timeline
    assert swept.batch == alone.batch and swept.options == alone.options
    assert swept.ops == alone.ops


def test_llama_sweep_equals_separate_analyses():
    points = _sweep(LLAMA, tuple(SIZES), **LLAMA_OPTS)
    assert [p.batch_size for p in points] == SIZES
    by_batch = {p.batch_size: p for p in points}
    # batch 1 records another stream (size-1 dims make some copies no-ops), so it is traced alone; 2 and 8
    # are traced, and 3 and 5 interpolated between them: the comparison below is not trace against trace.
    assert by_batch[3].source == by_batch[5].source == "interpolated from batch 2 and 8"
    assert {by_batch[b].source for b in (1, 2, 8)} == {"traced"}
    for b in SIZES:
        _same_numbers(by_batch[b].result, analyze(LLAMA, batch_size=b, **LLAMA_OPTS))
    # the peak does grow with the batch (the sweep is not comparing constants)
    assert by_batch[8].result.steady_state_peak.bytes > by_batch[3].result.steady_state_peak.bytes


def _report(result) -> dict:
    """The JSON report with its wall times blanked (they vary from run to run, as in tests/test_golden.py)."""
    from memgraph.render.json_report import render_json

    data = json.loads(render_json(result, 3))
    data["trace_seconds"] = data["analysis_seconds"] = 0.0
    return data


@pytest.mark.slow  # about 2.8 CPU s (13 traces); fast: test_llama_sweep_equals_separate_analyses (a sweep equals the
# separate analyses) and test_depth_synthesis.py::test_sweeps_share_the_notes_trace_only_for_the_same_notes (a swept,
# depth-synthesized trace equals the one traced alone, field by field)
def test_deep_sweep_json_equals_separate_analyses(tmp_path, monkeypatch):
    """A 10-layer llama (depth_run.MIN_DEPTH, so depth-synthesized from 3- and 4-layer traces) swept at 2, 3 and
    8: every size's whole JSON report is the separate analysis' at that size, the sweep's own note on the
    interpolated size aside; and the sweep traced 3 and 4 layers once per traced size (2, 8), and no 2-layer
    trace (the notes that differ with the depth, SDPA calls and autocast casts, are typed memgraph.notes.Note
    records whose per-layer counts follow the depth). Batch 1, traced alone in a sweep, is compared in
    test_llama_sweep_equals_separate_analyses."""
    import memgraph.trace.tracer as tracer

    config = json.loads(open(LLAMA).read())
    path = tmp_path / "deep-llama.json"
    path.write_text(json.dumps({**config, "num_hidden_layers": 10}))
    alone = {b: _report(analyze(str(path), batch_size=b, **LLAMA_OPTS)) for b in (2, 3, 8)}
    depths, trace_all = [], tracer._trace_all_layers
    monkeypatch.setattr(tracer, "_trace_all_layers",
                        lambda spec, opts, rank=0: depths.append(spec.config.num_hidden_layers) or
                        trace_all(spec, opts, rank))
    points = analyze_many(str(path), TrainingOptions(**LLAMA_OPTS), [2, 3, 8], [16])
    assert sorted(depths) == [3, 3, 4, 4]
    assert [p.source for p in points] == ["traced", "interpolated from batch 2 and 8", "traced"]
    for p in points:
        swept = _report(p.result)
        if p.batch_size == 3:
            swept["notes"].remove("sweep: batch 3 interpolated from batch 2 and 8 (memgraph/trace/shortcuts/batch.py): every "
                                  "storage's size is affine in the batch size and the two traces record the same stream")
        assert any(n.startswith("depth synthesis: traced 3 and 4 of 10 layers") for n in swept["notes"])
        assert swept == alone[p.batch_size], p.batch_size
    assert alone[8]["steady_state_peak"]["bytes"] > alone[3]["steady_state_peak"]["bytes"]  # not constants


def test_checked_sweep_traces_a_middle_size():
    points = _sweep(LLAMA, (2, 3, 4, 6), check=True, **LLAMA_OPTS)
    sources = {p.batch_size: p.source for p in points}
    assert sources == {2: "traced", 3: "interpolated from batch 2 and 6", 4: "traced", 6: "traced"}
    _same_numbers(points[1].result, analyze(LLAMA, batch_size=3, **LLAMA_OPTS))


def test_quadratic_storage_is_traced_per_size():
    """CLIP's contrastive logits are [b, b]: bytes quadratic in the batch, so nothing is interpolated."""
    opts = dict(target="cuda")
    points = _sweep("tests/configs/tiny-clip.json", (2, 3, 4), **opts)
    assert [p.source for p in points] == ["traced"] * 3
    _same_numbers(points[1].result, analyze("tests/configs/tiny-clip.json", batch_size=3, **opts))


def test_seq_len_list_gives_one_analysis_per_pair():
    points = analyze_many(LLAMA, TrainingOptions(**{**LLAMA_OPTS, "seq_len": 8}), [2, 4], [8, 16])
    assert [(p.seq_len, p.batch_size) for p in points] == [(8, 2), (8, 4), (16, 2), (16, 4)]
    assert points[0].result.options["seq_len"] == 8 and points[3].result.options["seq_len"] == 16
    _same_numbers(points[1].result, analyze(LLAMA, **{**LLAMA_OPTS, "seq_len": 8, "batch_size": 4}))


def test_batch_list_parsing():
    assert positive_int_list("4") == 4
    assert positive_int_list("1, 2,8") == (1, 2, 8)


def test_bad_batch_list_is_one_line_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["analyze", LLAMA, "--batch-size", "2,x"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "'x' is not an integer" in err and len(err.strip().splitlines()) == 1


def test_sweep_table_and_json(capsys):
    assert main(["analyze", LLAMA, "--seq-len", "16", "--batch-size", "2,3,4", "--target", "cuda"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line[:1].isdigit()]
    assert [line.split()[0] for line in lines] == ["2", "3", "4"]
    assert main(["analyze", LLAMA, "--seq-len", "16", "--batch-size", "2,3,4", "-f", "json"]) == 0
    import json

    reports = json.loads(capsys.readouterr().out)
    assert [r["options"]["batch_size"] for r in reports] == [2, 3, 4]
    assert [r["sweep_source"] for r in reports] == ["traced", "interpolated from batch 2 and 4", "traced"]


def test_html_sweep_is_refused_before_any_trace(capsys, monkeypatch):
    import memgraph.sweep

    monkeypatch.setattr(memgraph.sweep, "analyze_many", lambda *a, **k: pytest.fail("traced before the format check"))
    assert main(["analyze", LLAMA, "--batch-size", "2,4", "-f", "html"]) == 2
    assert "--format html shows one analysis" in capsys.readouterr().err
