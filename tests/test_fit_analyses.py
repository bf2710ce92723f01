"""memgraph fit's analyses: memoised by options, allocator-only changes replayed on the shared trace, the
per-candidate progress lines, and the peak's consumers in plain words (tiny-llama, seconds each)."""

import io
from dataclasses import replace
from pathlib import Path

from memgraph.api import analyze
from memgraph.fit.analyses import Analyses
from memgraph.fit.progress import FitProgress
from memgraph.fit.why import consumers
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import tiny_llama_fit_setup

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")


def _setup(**kw):
    return tiny_llama_fit_setup("t4", **kw)


def test_allocator_change_is_replayed_on_the_same_trace_and_equals_analyze():
    spec, opts = _setup()
    analyses = Analyses(spec)
    analyses.outcome(opts, "yours")
    changed = replace(opts, allocator_conf="expandable_segments:True")
    o = analyses.outcome(changed, "expandable")
    assert [how for _, how, _ in analyses.timings] == ["traced", "replayed on a trace it shares"]
    assert len(analyses.traces) == 1
    direct = analyze(TINY, changed)  # a fresh trace and analysis, as `memgraph analyze` runs it
    assert (o.device_total, o.device_total_upper) == (direct.required_bytes, direct.required_bytes_upper)
    assert o.allocated == direct.steady_state_peak.bytes


def test_a_setting_is_analysed_once():
    spec, opts = _setup()
    analyses = Analyses(spec)
    first = analyses.outcome(opts, "yours")
    again = analyses.outcome(replace(opts), "batch 1", changes=(("batch_size", 1),))
    assert len(analyses.timings) == 1
    assert again.device_total == first.device_total and again.how == "the analysis of yours"
    assert again.label == "batch 1" and again.seconds == 0.0


def test_progress_lines_only_on_a_terminal():
    shown, piped = io.StringIO(), io.StringIO()
    FitProgress(shown, enabled=True).done("[1/2] gradient checkpointing: 1.00 GiB, fits")
    FitProgress(piped).done("[1/2] gradient checkpointing: 1.00 GiB, fits")  # StringIO is no terminal
    assert shown.getvalue() == "\r\x1b[Kmemgraph fit: [1/2] gradient checkpointing: 1.00 GiB, fits\n"
    assert piped.getvalue() == ""


def test_consumers_group_the_layers_attention_probabilities():
    spec, opts = _setup(attn_implementation="eager")
    analyses = Analyses(spec)
    yours = analyses.outcome(opts, "yours")
    trace = next(iter(analyses.traces.values()))
    # the event at which iteration 2's backward starts: every saved activation is alive then
    backward = next(e for e, it, phase in trace.log.phase_marks if (it, phase) == (2, "backward"))
    rows = dict(consumers(trace, backward, 1000))
    # eager attention saves its softmax per layer: float32 [batch 1, 4 heads, 32, 32] = 16 KiB, which the
    # caching allocator rounds up to its 512 B multiple (still 16,384 B); 2 layers: one line of 32 KiB
    probs = [(what, b) for what, b in rows.items() if what.startswith("the attention probabilities")]
    assert probs == [("the attention probabilities (softmax of the [batch, heads, seq, seq] scores), float32 "
                      "[1x4x32x32] in model.layers.*.self_attn, saved for backward, 2 of them", 2 * 4 * 32 * 32 * 4)]


def test_a_setting_reusing_the_notes_trace_equals_analyze(tmp_path, monkeypatch):
    """fit traces inside ``shared_notes_trace`` (fit/__init__.py): a candidate's bytes and notes equal a fresh
    ``analyze`` of the same options (depth synthesis, 12 layers >= its MIN_DEPTH 10). This model's notes that change
    with the depth are typed (the SDPA call counts, memgraph/notes.py), so neither fit nor analyze traces the
    2-layer notes trace: 3 and 4 layers each (a plain-text note that changed would add one 2-layer trace, shared
    across fit's candidates)."""
    import json

    import memgraph.trace.tracer as tracer
    from memgraph.trace.shortcuts.depth_run import shared_notes_trace

    config = json.loads(Path(TINY).read_text())
    config["num_hidden_layers"] = 12
    deep = tmp_path / "deep-llama.json"
    deep.write_text(json.dumps(config))
    spec = resolve(str(deep))
    opts = resolve_defaults(spec, TrainingOptions(seq_len=32, gpu="t4", attn_implementation="sdpa")).options
    depths = []
    real = tracer._trace_all_layers
    monkeypatch.setattr(tracer, "_trace_all_layers",
                        lambda s, o, rank=0: depths.append(s.config.num_hidden_layers) or real(s, o, rank))
    analyses = Analyses(spec)
    changed = replace(opts, loss="chunked-ce")  # the same SDPA note at 3 and 4 layers as your settings
    with shared_notes_trace():
        analyses.outcome(opts, "yours")
        o = analyses.outcome(changed, "chunked")
    assert depths == [3, 4, 3, 4]
    depths.clear()
    direct = analyze(str(deep), changed)
    assert depths == [3, 4]
    assert (o.device_total, o.device_total_upper) == (direct.required_bytes, direct.required_bytes_upper)
    assert o.allocated == direct.steady_state_peak.bytes and o.result.notes == direct.notes
    assert o.result.notes[-1].startswith("depth synthesis: traced 3 and 4 of 12 layers")
