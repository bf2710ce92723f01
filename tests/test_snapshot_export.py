"""``--format snapshot``: the predicted step as a PyTorch memory snapshot that PyTorch's own viewer loads,
and several reports from one analysis (``-o a.json -o a.html``)."""

import json
import pickle
from pathlib import Path

import pytest
from torch.cuda import _memory_viz

from memgraph.allocator.caching_model import CachingAllocatorModel
from memgraph.allocator.snapshot import trace_peak
from memgraph.api import analyze_traced, predicted_snapshot
from memgraph.cli import analyze_targets, main
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.units import MiB

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")


def test_allocator_history_by_hand():
    # 1000 B rounds to 1024 (kMinBlockSize 512); a small-pool request gets a 2 MiB segment (kSmallBuffer).
    history = []
    m = CachingAllocatorModel(history=history)
    m.malloc("a", 1000)
    m.free("a")
    base = history[0][1]
    assert history == [("segment_alloc", base, 2 * MiB, None), ("alloc", base, 1024, "a"),
                       ("free_requested", base, 1024, "a"), ("free_completed", base, 1024, "a")]
    m.empty_cache()
    assert history[-1] == ("segment_free", base, 2 * MiB, None)


@pytest.fixture(scope="module")
def traced():
    opts = TrainingOptions(seq_len=32)
    result, trace = analyze_traced(TINY, opts)
    return result, predicted_snapshot(trace, opts)


def test_snapshot_peak_equals_report(traced):
    result, snap = traced
    # The device trace covers every traced iteration: its most-allocated moment is the larger of the two peaks.
    assert trace_peak(snap) == max(result.first_iteration_peak.bytes, result.steady_state_peak.bytes)
    # The segments are the allocator's state after the last iteration: their total is what it reserves then,
    # never more than the reserved peak.
    reserved_now = sum(s["total_size"] for s in snap["segments"])
    assert 0 < reserved_now <= max(result.device["first_iteration_reserved"], result.device["steady_state_reserved"])


def test_pytorch_memory_viz_reads_it(traced):
    _, snap = traced
    snap = pickle.loads(pickle.dumps(snap))  # what a user loads from the file
    summary = _memory_viz.segsum(snap)  # raises on any accounting mismatch between segments and blocks
    assert "total_reserved" in summary
    assert _memory_viz.trace(snap).startswith("Device 0")
    assert "snapshot.pickle" in _memory_viz.trace_plot(snap)
    alloc = next(e for e in snap["device_traces"][0] if e["action"] == "alloc")
    assert alloc["frames"] and alloc["frames"][0]["filename"]


def test_targets_from_extensions_and_format():
    assert analyze_targets(None, None) == [(None, "table")]
    assert analyze_targets(["r.html", "r.JSON", "r.pickle", "r.out"], None) == [
        ("r.html", "html"), ("r.JSON", "json"), ("r.pickle", "snapshot"), ("r.out", "table")]
    assert analyze_targets(["r.out"], "md") == [("r.out", "md")]
    with pytest.raises(MemgraphError, match="'r.html' is a html file but --format is json"):
        analyze_targets(["r.html"], "json")
    with pytest.raises(MemgraphError, match="given twice"):
        analyze_targets(["a.md", "a.md"], None)


def test_several_reports_from_one_analysis(tmp_path, capsys):
    paths = [tmp_path / n for n in ("r.json", "r.md", "r.pickle")]
    assert main(["analyze", TINY, "-s", "32", *[a for p in paths for a in ("-o", str(p))]]) == 0
    report = json.loads(paths[0].read_text())
    assert paths[1].read_text().startswith("#")
    assert trace_peak(pickle.loads(paths[2].read_bytes())) == max(
        report["first_iteration_peak"]["bytes"], report["steady_state_peak"]["bytes"])
    err = capsys.readouterr().err
    assert all(f"memgraph: wrote {p}" in err for p in paths)


@pytest.mark.parametrize("args, message", [
    (["-f", "snapshot"], "give --output FILE.pickle"),
    (["-o", "r.pickle", "--target", "cpu"], "not with --target cpu"),
])
def test_snapshot_refusals_write_nothing(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", TINY, "-s", "32", *args]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
