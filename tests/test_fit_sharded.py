"""fit's lower bound for sharded changes (memgraph/fit/bound.py sharded_bound): FSDP and DeepSpeed ZeRO-2/3 over N
GPUs that cannot fit are not traced; DeepSpeed traced at full depth without a synthesis attempt."""

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from memgraph.fit.analyses import Analyses, trace_key
from memgraph.fit.bound import sharded_bound, sharded_parts
from memgraph.fit.candidates import _SharedBound, _smallest_fsdp, _try, fsdp
from memgraph.fit.outcome import BOUND_HOW, Outcome
from memgraph.fit.progress import QUIET
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.record.event_log import EventLog, Origin, Role, StorageRecord
from tests.conftest import TINY_LLAMA_PARAMETERS as PARAMETERS  # by hand there
from tests.conftest import deep_tiny_llama, traced_depths

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")
ZERO = {stage: str(Path(__file__).parent.parent / "memgraph" / "ds_engine" / f"zero{stage}.json") for stage in (2, 3)}
GiB = 1 << 30


def _store(sid, nbytes, origin, phase, iteration, alloc, free=None, **kw):
    return StorageRecord(sid, nbytes, "float32", (1,), origin, f"s{sid}", kw.pop("module", "model.layers.0"), phase,
                         iteration, 0, alloc, free, **kw)


def _log():
    """Iteration 2 of a step: 8 GiB of parameters, 16 GiB of Adam state from iteration 1's step, and in its forward
    20 GiB saved for backward by a layer, 1 GiB not saved (freed before backward), 4 GiB saved by no module."""
    return EventLog(
        storages=[_store(0, 8 * GiB, Origin.PARAMETER, "setup", 0, 0),
                  _store(1, 16 * GiB, Origin.OP, "optimizer", 1, 1, role=Role.OPTIMIZER_STATE),
                  _store(2, 20 * GiB, Origin.OP, "forward", 2, 3, 9, saved_for_backward=True),
                  _store(3, 1 * GiB, Origin.OP, "forward", 2, 4, 5),
                  _store(4, 4 * GiB, Origin.OP, "forward", 2, 6, 9, saved_for_backward=True, module=""),
                  _store(5, 8 * GiB, Origin.OP, "backward", 2, 8, role=Role.GRADIENT)],
        events=[], phase_marks=[(0, 0, "setup"), (1, 1, "optimizer"), (2, 2, "forward"), (7, 2, "backward"),
                                (10, 2, "optimizer")])


def test_sharded_bound_by_hand():
    parts = sharded_parts(SimpleNamespace(log=_log()))
    assert parts == (20 * GiB, 8 * GiB, 16 * GiB)  # A: the layer's saved 20 GiB only; P; S alive at backward
    yours = TrainingOptions(seq_len=32)
    # FSDP over 8: 20 GiB + (8 + 16) GiB / 8 = 23 GiB
    assert sharded_bound(parts, yours, replace(yours, nproc=8, strategy="fsdp")) == 23 * GiB
    assert sharded_bound(parts, yours, replace(yours, nproc=2, deepspeed=ZERO[3])) == 32 * GiB  # 20 + 24 / 2
    # with an allocator change beside it the bound holds; with anything else, or DeepSpeed in bf16, it is not used
    assert sharded_bound(parts, yours, replace(yours, nproc=8, strategy="fsdp",
                                               allocator_conf="expandable_segments:True")) == 23 * GiB
    assert sharded_bound(parts, yours, replace(yours, nproc=8, strategy="fsdp", gradient_checkpointing=True)) is None
    bf16 = replace(yours, precision="bf16-mixed")
    assert sharded_bound(parts, bf16, replace(bf16, nproc=8, strategy="fsdp", fsdp_mixed_precision=True)) is None
    assert sharded_bound(parts, bf16, replace(bf16, nproc=2, deepspeed=ZERO[2])) is None
    assert sharded_bound(parts, bf16, replace(bf16, nproc=2, strategy="fsdp")) is None  # saved fewer: bound.py
    assert sharded_bound(parts, yours, yours) is None  # not a sharded change


def test_a_ruled_out_fsdp_is_not_analysed_and_stops_the_search():
    """Your trace's bound: 23 GiB over 8 GPUs, 32 over 2, on a 40 GiB card (4 and 2: 26 and 32): every size fits
    the bound, so each is analysed; on a 20 GiB card FSDP over 8 already cannot fit: nothing analysed."""
    yours = TrainingOptions(seq_len=32, gpu="a100-40gb")
    analysed = []

    class _Analyses:
        traces = {trace_key(yours): SimpleNamespace(log=_log())}

        def outcome(self, opts, label, cost="", changes=()):
            analysed.append(label)
            return Outcome(label, opts, 30 * GiB, 30 * GiB, 30 * GiB, 40 * GiB, True, True, 0.0, cost, None, changes)

    a = _Analyses()
    best = _smallest_fsdp(a, yours, 40 * GiB, QUIET, [2, 4, 8], _SharedBound(a, yours, 40 * GiB))
    assert analysed == ["FSDP over 8 GPUs", "FSDP over 4 GPUs", "FSDP over 2 GPUs"] and best.label == "FSDP over 2 GPUs"
    analysed.clear()
    out = _smallest_fsdp(a, yours, 20 * GiB, QUIET, [2, 4, 8], _SharedBound(a, yours, 20 * GiB))
    assert analysed == [] and out.how == BOUND_HOW and out.device_total == 23 * GiB and not out.fits
    # a capacity between the bounds of 4 and 2 GPUs (26 and 32 GiB): 8 and 4 analysed, 2 ruled out
    out = _smallest_fsdp(a, yours, 30 * GiB, QUIET, [2, 4, 8], _SharedBound(a, yours, 30 * GiB))
    assert analysed == ["FSDP over 8 GPUs", "FSDP over 4 GPUs"]
    assert _try(a, fsdp(2), yours, 30 * GiB, _SharedBound(a, yours, 30 * GiB)).how == BOUND_HOW


def _tiny(precision):
    spec = resolve(TINY)
    return spec, resolve_defaults(spec, TrainingOptions(seq_len=32, gpu="a100-40gb", precision=precision)).options


def _live_at_last_backward(trace) -> int:
    """Bytes of every storage alive when the trace's last backward begins (the cuBLAS workspaces left out)."""
    log = trace.log
    last = max(it for _, it, _ in log.phase_marks)
    start = next(e for e, it, phase in log.phase_marks if (it, phase) == (last, "backward"))
    return sum(s.nbytes for s in log.storages if s.origin != Origin.WORKSPACE and s.alloc_event < start
               and (s.free_event is None or s.free_event >= start))


@pytest.mark.slow  # seven traces of tiny-llama, FSDP and DeepSpeed among them
@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_each_sharded_step_holds_at_least_its_bound(precision):
    """Measured, not assumed: traced, each sharded step has at least its bound alive at its own last backward start
    (the cuBLAS workspaces aside), so its allocated peak and device total are at least the bound; FSDP's trace shows
    your A exactly and P / N, S / N (plus the 4-byte step of each of the 21 parameters)."""
    spec, opts = _tiny(precision)
    analyses = Analyses(spec)
    analyses.outcome(opts, "yours")
    parts = sharded_parts(analyses.traces[trace_key(opts)])
    saved, params, state = parts
    assert params == 4 * PARAMETERS == 808_192  # float32 weights in both precisions
    assert state == 2 * 4 * PARAMETERS + 21 * 4  # exp_avg, exp_avg_sq, and a float32 step per parameter
    changes = [replace(opts, nproc=n, strategy="fsdp") for n in (2, 4, 8)]
    changes += [replace(opts, nproc=n, deepspeed=ZERO[stage]) for n in (2, 8) for stage in (2, 3)]
    checked = 0
    for changed in changes:
        bound = sharded_bound(parts, opts, changed)
        if bound is None:
            assert precision != "fp32"
            continue
        o = analyses.outcome(changed, f"{changed.nproc} {changed.strategy or changed.deepspeed}")
        trace = analyses.traces[trace_key(changed)]
        assert bound <= _live_at_last_backward(trace) <= o.allocated <= o.device_total, changed
        if changed.strategy == "fsdp":
            assert sharded_parts(trace) == (saved, params // changed.nproc, 2 * 4 * PARAMETERS // changed.nproc + 84)
        checked += 1
    assert checked == (7 if precision == "fp32" else 0)


@pytest.mark.slow  # a DeepSpeed trace of a 12-layer tiny-llama
def test_deepspeed_is_traced_at_full_depth_without_an_attempt(tmp_path, monkeypatch):
    pytest.importorskip("deepspeed")
    from memgraph.api import analyze
    from memgraph.trace.shortcuts.depth_run import DEEPSPEED_WHY

    deep, depths = deep_tiny_llama(tmp_path), traced_depths(monkeypatch)
    opts = TrainingOptions(seq_len=32, gpu="a100-40gb", nproc=2, deepspeed=ZERO[2])
    r = analyze(str(deep), opts)
    # rank 0, then rank 1, whose ZeRO partition touches other parameters (ds_engine/run.py rank_layouts): both whole
    assert depths == [12, 12]
    assert f"depth synthesis: not used ({DEEPSPEED_WHY}); all 12 layers traced" in r.notes
    off = analyze(str(deep), replace(opts, depth_synthesis="off"))  # the full trace, as the attempt fell back to
    assert (r.required_bytes, r.required_bytes_upper, r.steady_state_peak.bytes) == \
        (off.required_bytes, off.required_bytes_upper, off.steady_state_peak.bytes)


def test_a_ruled_out_change_reads_as_a_bound_in_the_table_and_the_json():
    from memgraph.fit.outcome import FitReport, ruled_out
    from memgraph.fit.render import render_fit

    opts = TrainingOptions(seq_len=32)
    yours = Outcome("your settings", opts, 50 * GiB, 50 * GiB, 52 * GiB, 40 * GiB, False, False, 1.0)
    b = ruled_out("FSDP over 8 GPUs", replace(opts, nproc=8, strategy="fsdp"), 42 * GiB, 40 * GiB, "needs 8 GPUs",
                  (("nproc", 8), ("strategy", "fsdp")))
    report = FitReport("m", "A100", 40 * GiB, yours, "batch-size", None, "x", changes=[b])
    table = render_fit(report, "table")
    assert "a lower bound, not analysed" in table
    assert [line.split() for line in table.splitlines() if line.startswith("FSDP")] == \
        [["FSDP", "over", "8", "GPUs", ">=", "42.00", "GiB", "-", "no", "(bound)", "-", "needs", "8", "GPUs"]]
    change = json.loads(render_fit(report, "json"))["changes"][0]
    assert change["required_bytes"] == 42 * GiB and change["how"] == BOUND_HOW and not change["fits"]
