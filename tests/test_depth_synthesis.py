"""Depth synthesis (memgraph/trace/shortcuts/depth.py, depth_run.py): a deep model traced at 3 and 4 layers and
synthesized to its full depth gives the trace a full trace gives, exactly: every StorageRecord field,
every event, op and phase mark, the iteration bounds, trainable sids, parameter counts, notes and
modalities (no tolerance: the synthesis copies records, it computes no bytes). Where the layers are
not copies of each other the full trace is used, with a note saying why.
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from transformers import PreTrainedModel

from memgraph.api import result_of_trace
from memgraph.model_spec.depth import model_depth, with_depth
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.notes import Note
from memgraph.trace.shortcuts.depth import SynthesisError, find_stack
from memgraph.trace.shortcuts.checks import first_difference
from memgraph.trace.shortcuts.depth_run import _extrapolate_notes, trace_with_depth_synthesis
from memgraph.trace.record.event_log import Origin
from memgraph.trace.tracer import trace_training

LLAMA, GPT2 = "tests/configs/tiny-llama.json", "tests/configs/tiny-gpt2.json"


@pytest.fixture(autouse=True)
def _shallow_models_synthesize(monkeypatch):
    """These tests use 5-8 layer models (cheap to trace in full for the comparison): let them synthesize,
    although by default a model needs depth_run.MIN_DEPTH layers for synthesis to trace fewer layers."""
    monkeypatch.setattr("memgraph.trace.shortcuts.depth_run.MIN_DEPTH", 5)
BASE = dict(batch_size=1, seq_len=16)


@functools.lru_cache(maxsize=None)
def _deep(config: str, layers: int, tmp: str = "/tmp") -> str:
    """``config`` with ``layers`` layers (GPT-2's ``n_layer``, else ``num_hidden_layers``), as a file."""
    with open(config) as f:
        data = json.load(f)
    data["n_layer" if "n_layer" in data else "num_hidden_layers"] = layers
    path = f"{tmp}/memgraph-test-depth-{layers}-{config.rsplit('/', 1)[-1]}"
    with open(path, "w") as f:
        json.dump(data, f)
    return path


@functools.lru_cache(maxsize=None)
def _traces(config: str, layers: int, **opts):
    """(synthesized, full) traces of ``config`` at ``layers`` layers."""
    spec = resolve(_deep(config, layers))
    options = TrainingOptions(**BASE, **opts)
    return trace_training(spec, options), trace_training(spec, replace(options, depth_synthesis="off")), options


def _assert_same(config: str, layers: int, expected_note: str | None = None, **opts):
    synthesized, full, _ = _traces(config, layers, **opts)
    note = synthesized.notes[-1]
    assert note.startswith(expected_note or f"depth synthesis: traced 3 and 4 of {layers} layers; layer 1 repeated"), note
    assert not any(n.startswith("depth synthesis") for n in full.notes)
    compared = replace(synthesized, notes=synthesized.notes[:-1])
    assert first_difference(compared, full) is None
    # the same comparison spelled out, so that a weaker first_difference cannot hide a difference
    assert synthesized.log.storages == full.log.storages  # every StorageRecord field
    assert synthesized.log.events == full.log.events and synthesized.log.ops == full.log.ops
    assert synthesized.log.phase_marks == full.log.phase_marks
    assert synthesized.iteration_bounds == full.iteration_bounds
    assert synthesized.trainable_sids == full.trainable_sids
    assert (synthesized.parameter_count, synthesized.trainable_parameter_count) == \
        (full.parameter_count, full.trainable_parameter_count)
    assert list(synthesized.modalities.items()) == list(full.modalities.items())
    assert compared.notes == full.notes
    # the typed notes stay typed, with the full trace's numbers in their fields
    assert [n.fields for n in compared.notes if isinstance(n, Note)] == [n.fields for n in full.notes if isinstance(n, Note)]
    # the synthesized layers are really there: parameters of the last layer, named as a trace names them
    last = [s.name for s in synthesized.log.storages if s.origin == Origin.PARAMETER and f".{layers - 1}." in s.name]
    assert last and not any(f".{layers}." in s.name for s in synthesized.log.storages)


def test_llama_fp32_foreach_adamw_equals_full_trace():
    _assert_same(LLAMA, 7, optimizer_impl="foreach")


@pytest.mark.parametrize("target", ["cuda", pytest.param("cpu", marks=pytest.mark.slow)])  # one fast, one --full
def test_llama_for_loop_adamw_equals_full_trace(target):
    """The for-loop optimizer's ``exp_avg_sq.sqrt() / bias_correction2_sqrt``: the quotient of a temporary of a
    layer and a number belongs to that layer (ops labelled in program order: depth.py); it fell back before."""
    _assert_same(LLAMA, 6, optimizer_impl="for-loop", target=target)


def test_gpt2_equals_full_trace():
    _assert_same(GPT2, 6)


@pytest.mark.slow
@pytest.mark.parametrize("opts", [
    dict(precision="bf16-mixed", optimizer_impl="fused"),
    dict(gradient_checkpointing=True),
    dict(lora_rank=4),
    dict(loop="plain"),  # the KV cache the outputs keep, and its note
    dict(strategy="tp", nproc=2),  # the TP note's modules outside the plan: a typed count, no 2-layer trace
    # autocast's region count grows by one per checkpointed layer's recompute: a per-layer count of its note
    dict(precision="bf16-mixed", gradient_checkpointing=True),
], ids=["bf16-mixed-fused", "checkpointing", "lora", "plain-loop", "tensor-parallel", "bf16-mixed-checkpointing"])
def test_llama_variants_equal_full_trace(opts):
    _assert_same(LLAMA, 6, **opts)


@pytest.mark.slow
def test_offloading_with_autocast_and_checkpointing_equals_full_trace():
    """The offload note is a typed note (memgraph/step/activation_offload.py) whose counts scale with the depth: no
    third (2-layer) trace, and its words equal the full trace's."""
    _assert_same(LLAMA, 6, "depth synthesis: traced 3 and 4 of 6 layers; layer 1 repeated",
                 precision="bf16-mixed", gradient_checkpointing=True, activation_offload=True)


_ENABLE = getattr(PreTrainedModel, "activation_checkpointing_enable", PreTrainedModel.gradient_checkpointing_enable)


@pytest.mark.skipif("every_n_layers" not in inspect.signature(_ENABLE).parameters,
                    reason="transformers 5.6 has no every_n_layers (--checkpoint-every refused)")
# reentrant in --full: the same period-of-two synthesis as non-reentrant (depth.py); the reentrant checkpoint's saved
# inputs stay fast in test_knobs_checkpointing.py (test_reentrant_saves_the_checkpoint_inputs_it_is_given)
@pytest.mark.parametrize("impl", ["non-reentrant", pytest.param("reentrant", marks=pytest.mark.slow)])
def test_checkpointing_every_2nd_layer_repeats_a_period_of_two_layers(impl):
    """--checkpoint-every 2 checkpoints layers 0, 2, 4, ...: no single layer looks like its neighbours (the
    3-layer synthesis of 4 layers differs from their trace), so a block of two layers is repeated: traced at 6
    and 8 layers (3 and 4 blocks), the 8-layer synthesis checked against the 8-layer trace, then 12 layers
    synthesized, equal to the full 12-layer trace record by record."""
    _assert_same(LLAMA, 12, "depth synthesis: traced 6 and 8 of 12 layers; layers 2 to 3 (one period of "
                 "--checkpoint-every 2) repeated to 12 layers", gradient_checkpointing=True, checkpoint_every=2,
                 checkpoint_impl=impl)


@pytest.mark.slow  # FSDP traces of a 7-layer model and the comparison
def test_fsdp_equals_full_trace():
    """FSDP2's hooks on each layer run two profiler ops under the parent module ``model`` before the layer: they
    go with the layer after them (depth.py ``_outside_the_layers``); before, the synthesis lacked them and fell
    back. DTensor's sharding propagation runs an op on fake copies the first time a process sees its schema (the
    optimizer's first step on the sharded parameters: 156 ``empty_strided``, 6 ``zeros_like`` and one
    ``_fused_adamw_`` at 3 layers); those are not recorded (recorder.py, private_api.fake_mode_active), so the
    first FSDP trace of a process is synthesized too, and equals a second trace of the same step."""
    import torch

    fsdp = dict(nproc=8, strategy="fsdp", gpu="a100-40gb")
    torch._C._clear_DTensor_sharding_propagator_cache()  # as in a process that has run no FSDP step yet
    _assert_same(LLAMA, 7, "depth synthesis: traced 3 and 4 of 7 layers; layer 1 repeated", **fsdp)
    spec, opts = with_depth(resolve(_deep(LLAMA, 7)), 3), TrainingOptions(**BASE, **fsdp, depth_synthesis="off")
    torch._C._clear_DTensor_sharding_propagator_cache()
    first, again = trace_training(spec, opts), trace_training(spec, opts)
    assert first_difference(first, again) is None


def test_a_depth_that_is_not_whole_periods_traces_every_layer():
    calls = []
    opts = TrainingOptions(gradient_checkpointing=True, checkpoint_every=2)
    trace = trace_with_depth_synthesis(resolve(_deep(LLAMA, 11)), opts, _fake_traces(calls))
    assert calls == [11]  # 11 layers: the last period would be half a block
    assert trace.notes == ["depth synthesis: not used (11 layers are not whole periods of --checkpoint-every 2); "
                           "all layers traced"]


def test_results_equal():
    """Peaks, reserved and the required total of the synthesized trace are those of the full trace."""
    synthesized, full, opts = _traces(LLAMA, 7, optimizer_impl="foreach")
    a, b = result_of_trace("m", opts, synthesized), result_of_trace("m", opts, full)
    assert a.steady_state_peak == b.steady_state_peak and a.first_iteration_peak == b.first_iteration_peak
    assert a.phase_peaks == b.phase_peaks and a.static == b.static
    assert a.device == b.device and a.required_bytes == b.required_bytes
    assert a.device["steady_state_reserved"] > 0  # a cuda-target result: the reserved figure is compared too


def _fake_traces(calls: list):
    def trace_at(spec):
        calls.append(spec.config.num_hidden_layers)
        return SimpleNamespace(notes=[])

    return trace_at


def test_off_and_shallow_models_trace_every_layer():
    spec = resolve(_deep(LLAMA, 7))
    calls = []
    trace = trace_with_depth_synthesis(spec, TrainingOptions(depth_synthesis="off"), _fake_traces(calls))
    assert calls == [7] and trace.notes == []
    calls.clear()  # 4 layers: nothing to gain over the 2-, 3- and 4-layer traces, no note
    trace = trace_with_depth_synthesis(resolve(_deep(LLAMA, 4)), TrainingOptions(), _fake_traces(calls))
    assert calls == [4] and trace.notes == []


def test_per_layer_config_falls_back_with_a_note(tmp_path):
    """Alternating sliding/full attention: a 3-layer copy would not keep the pattern."""
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 1000, "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 6,
              "layer_types": ["sliding_attention", "full_attention"] * 3}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    spec = resolve(str(path))
    assert model_depth(spec) == (None, "the config has per-layer settings (layer_types)")
    calls = []
    trace = trace_with_depth_synthesis(spec, TrainingOptions(), _fake_traces(calls))
    assert calls == [6]
    assert trace.notes == ["depth synthesis: not used (the config has per-layer settings (layer_types)); "
                           "all layers traced"]
    # the same list with one entry throughout is resized with the depth
    config["layer_types"] = ["full_attention"] * 6
    config["use_sliding_window"] = False
    path.write_text(json.dumps(config))
    uniform = resolve(str(path))
    assert model_depth(uniform) == (6, None)
    assert with_depth(uniform, 3).config.layer_types == ["full_attention"] * 3
    assert uniform.config.num_hidden_layers == 6  # the caller's spec is unchanged


def test_layers_that_differ_fall_back_with_a_note():
    """A test double whose 4-layer trace has one storage of layer 2 twice as large: the synthesis from 3
    layers cannot reproduce it, so the full trace is used."""
    _, full, opts = _traces(LLAMA, 7, optimizer_impl="foreach")
    traced = {}

    def trace_at(spec):
        depth = spec.config.num_hidden_layers
        if depth == 7:
            return replace(full, notes=list(full.notes))
        trace = traced.get(depth) or trace_training(spec, replace(opts, depth_synthesis="off"))
        traced[depth] = trace
        if depth == 4:
            trace = replace(trace, log=replace(trace.log, storages=list(trace.log.storages)))
            i = next(s.sid for s in trace.log.storages if ".layers.2." in s.module and s.origin == Origin.OP)
            trace.log.storages[i] = replace(trace.log.storages[i], nbytes=2 * trace.log.storages[i].nbytes)
        return trace

    trace = trace_with_depth_synthesis(resolve(_deep(LLAMA, 7)), opts, trace_at)
    assert trace.log is full.log
    assert trace.notes[-1].startswith("depth synthesis: not used (the synthesis of 4 layers differs from their "
                                      "trace: storages["), trace.notes[-1]
    assert trace.notes[-1].endswith("all 7 layers traced")


def test_notes_follow_the_depth():
    """SDPA call counts grow by the calls per layer; a number that does not lie on a line is refused."""
    notes = {2: ["SDPA: math kernel x 4 calls over 2 iterations"], 3: ["SDPA: math kernel x 6 calls over 2 iterations"]}
    assert _extrapolate_notes(notes, 2, 3, 32) == ["SDPA: math kernel x 64 calls over 2 iterations"]
    notes = {2: ["KV cache 1.50 MiB"], 4: ["KV cache 2.25 MiB"]}  # 50 -> 25: not a per-layer count
    with pytest.raises(SynthesisError):
        _extrapolate_notes(notes, 2, 4, 32)


def test_typed_notes_follow_the_depth():
    """A typed note's per-layer count moves along the line through two depths; its other fields must not change.
    32 layers from 3 and 4: 6 calls at 3 layers, 8 at 4, so 2 per layer: 6 + 2 * (32 - 3) = 64; "iterations" stays
    2; the text is made from the template, with the thousands comma its format asks for."""
    sdpa = "SDPA: math kernel x {calls:,} calls over {iterations} iterations"
    at = {d: [Note(sdpa, per_layer=("calls",), calls=c, iterations=2), "GradScaler: run on meta"]
          for d, c in ((3, 6), (4, 8))}
    (deep, scaler) = _extrapolate_notes(at, 3, 4, 32)
    assert isinstance(deep, Note) and dict(deep.fields) == {"calls": 64, "iterations": 2}
    assert deep == "SDPA: math kernel x 64 calls over 2 iterations" and scaler == "GradScaler: run on meta"
    assert _extrapolate_notes({3: [Note(sdpa, per_layer=("calls",), calls=1000, iterations=2)],
                               4: [Note(sdpa, per_layer=("calls",), calls=1010, iterations=2)]}, 3, 4, 2003) == \
        ["SDPA: math kernel x 21,000 calls over 2 iterations"]  # 1000 + 10 * (2003 - 3)
    with pytest.raises(SynthesisError):  # a field that is not a per-layer count changes: refused
        _extrapolate_notes({3: [Note(sdpa, per_layer=("calls",), calls=6, iterations=2)],
                            4: [Note(sdpa, per_layer=("calls",), calls=8, iterations=3)]}, 3, 4, 32)
    with pytest.raises(SynthesisError):  # 6 at 2 layers, 9 at 4: 1.5 calls per layer is not a whole count
        _extrapolate_notes({2: [Note(sdpa, per_layer=("calls",), calls=6, iterations=2)],
                            4: [Note(sdpa, per_layer=("calls",), calls=9, iterations=2)]}, 2, 4, 32)


def test_typed_notes_need_no_third_trace_and_plain_ones_do():
    """A note with 2 calls per layer: typed, it is scaled from the 3- and 4-layer traces (2 * 10 = 20 at 10
    layers); as a plain str (a producer not yet typed) it still costs the 2-layer trace and the check on it."""
    spec, calls, traced = resolve(_deep(LLAMA, 10)), [], {}
    opts = TrainingOptions(**BASE, optimizer_impl="foreach")

    def traced_with(note):
        def trace_at(s):
            depth = s.config.num_hidden_layers
            calls.append(depth)
            if depth not in traced:  # each depth traced once for both cases
                traced[depth] = trace_training(s, replace(opts, depth_synthesis="off"))
            return replace(traced[depth], notes=[note(depth)])
        return trace_at

    typed = trace_with_depth_synthesis(spec, opts, traced_with(lambda d: Note("x {n} calls", per_layer=("n",), n=2 * d)))
    assert calls == [3, 4] and typed.notes[0] == "x 20 calls" and dict(typed.notes[0].fields) == {"n": 20}
    assert typed.notes[1].startswith("depth synthesis: traced 3 and 4 of 10 layers")
    calls.clear()
    plain = trace_with_depth_synthesis(spec, opts, traced_with(lambda d: f"x {2 * d} calls"))
    assert calls == [3, 4, 2] and plain.notes[0] == "x 20 calls" and not isinstance(plain.notes[0], Note)
    assert plain.notes[1].startswith("depth synthesis: traced 2, 3 and 4 of 10 layers")


def test_find_stack():
    names = {2: ["model.embed.weight", "model.layers.0.q.weight", "model.layers.1.q.weight",
                 "model.layers.0.experts.0.w", "model.layers.0.experts.1.w"],
             3: ["model.embed.weight", "model.layers.0.q.weight", "model.layers.1.q.weight", "model.layers.2.q.weight",
                 "model.layers.0.experts.0.w", "model.layers.0.experts.1.w"]}
    assert find_stack(names) == "model.layers"  # not the 2 experts: their count does not follow the depth
    with pytest.raises(SynthesisError):
        find_stack({2: ["a.0.w", "a.1.w"], 3: ["a.0.w", "a.1.w"]})


@pytest.mark.slow
def test_batch_sweep_on_synthesized_traces():
    """The sweep interpolates between two synthesized traces exactly as between two full ones."""
    from memgraph.sweep import analyze_many

    model = _deep(LLAMA, 6)
    opts = dict(seq_len=16, precision="bf16-mixed", attn_implementation="sdpa")
    points = analyze_many(model, TrainingOptions(**opts), [2, 3, 4], [16])
    by_batch = {p.batch_size: p for p in points}
    assert by_batch[3].source == "interpolated from batch 2 and 4"
    full = analyze_many(model, TrainingOptions(depth_synthesis="off", **opts), [3], [16])[0].result
    swept = by_batch[3].result
    assert swept.steady_state_peak == full.steady_state_peak and swept.device == full.device
    assert swept.required_bytes == full.required_bytes and swept.phase_peaks == full.phase_peaks


def test_sweeps_share_the_notes_trace_only_for_the_same_notes():
    """Inside ``shared_notes_trace`` (a batch sweep) the 2-layer trace, used for its notes only, is traced once
    for each pair of 3- and 4-layer notes: batch 4 after batch 2 reuses it (the same SDPA and autocast notes),
    fp32 does not (no autocast note, another SDPA kernel), and a second block starts empty. The trace that
    reused the notes (batch 4) equals the one traced without sharing, field by field (batch 2, first in its
    block, shares nothing yet)."""
    from memgraph.trace.shortcuts.depth_run import _NOTES_BELOW, shared_notes_trace

    spec = resolve(_deep(LLAMA, 6))
    mixed = TrainingOptions(**{**BASE, "batch_size": 2}, precision="bf16-mixed", attn_implementation="sdpa")
    calls = []

    def run(opts):
        def trace_at(s):  # notes as plain str (a producer not yet typed): the 2-layer notes trace is needed
            calls.append((opts.batch_size, opts.precision, s.config.num_hidden_layers))
            trace = trace_training(s, replace(opts, depth_synthesis="off"))
            return replace(trace, notes=[str.__str__(n) for n in trace.notes])
        return trace_with_depth_synthesis(spec, opts, trace_at)

    alone = run(replace(mixed, batch_size=4))
    calls.clear()
    with shared_notes_trace():
        shared = {b: run(replace(mixed, batch_size=b)) for b in (2, 4)}
        fp32 = run(replace(mixed, precision="fp32"))
    with shared_notes_trace():  # another sweep: nothing shared from the last one
        assert _NOTES_BELOW.get() == {}
    assert _NOTES_BELOW.get() is None  # and outside a block nothing is shared
    assert calls == [(2, "bf16-mixed", 3), (2, "bf16-mixed", 4), (2, "bf16-mixed", 2),
                     (4, "bf16-mixed", 3), (4, "bf16-mixed", 4),  # 2 layers: batch 2's notes
                     (2, "fp32", 3), (2, "fp32", 4), (2, "fp32", 2)]  # other notes: traced
    assert first_difference(shared[4], alone) is None and shared[4].notes == alone.notes
    for b in (2, 4):
        assert shared[b].notes[-1].startswith("depth synthesis: traced 2, 3 and 4")
        assert not any(isinstance(n, Note) for n in shared[b].notes)  # the fallback's notes are plain text
    assert fp32.notes[-1].startswith("depth synthesis: traced 2, 3 and 4")
