"""Reports people read: repeated layers folded, identical tensors grouped, the past-last-use column, the
out-of-memory point in plain words, and warnings for inputs a model was not made for.

Every expected figure is written out by hand beside its assertion."""

from __future__ import annotations

import json

import pytest

from memgraph.analysis.group_by import fold_repeated, path_pattern, tensor_groups
from memgraph.analysis.result import ModuleRow, Peak, TensorRow
from memgraph.api import analyze
from memgraph.model_spec.input_warnings import input_warnings
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.render import sections
from memgraph.render.formats import render

MIB = 2**20


def _row(module: str, params: int = 10, peak: int = 100) -> ModuleRow:
    return ModuleRow(module=module, parameters=params, trainable_parameters=params, parameter_bytes=4 * params,
                     saved_activation_bytes=peak // 2, peak_bytes=peak)


# -- folded module rows -----------------------------------------------------------------------------


def test_identical_layers_fold_and_a_different_first_layer_splits_the_run():
    # h.0 holds more at the peak (the embedding output), h.1-3 are identical, h.4 has other parameters
    rows = [_row("wte"), _row("h.0", peak=150), _row("h.1"), _row("h.2"), _row("h.3"), _row("h.4", params=11),
            _row("ln_f")]
    runs = fold_repeated(rows)
    assert [(r.row.module, r.count, r.first, r.last) for r in runs] == [
        ("wte", 1, None, None), ("h.0", 1, None, None), ("h.1-3", 3, 1, 3), ("h.4", 1, None, None),
        ("ln_f", 1, None, None)]
    folded = runs[2].row
    assert (folded.parameters, folded.peak_bytes) == (10, 100)  # one layer's figures, not three
    # rows x count add up to the unfolded rows: 7 rows' peaks 100 + 150 + 3 x 100 + 100 + 100 = 750
    assert sum(r.row.peak_bytes * r.count for r in runs) == sum(r.peak_bytes for r in rows) == 750


def test_layers_fold_with_their_children_and_a_differing_child_breaks_the_run():
    rows = [_row("model.layers.0"), _row("model.layers.0.attn"), _row("model.layers.0.mlp"),
            _row("model.layers.1"), _row("model.layers.1.attn"), _row("model.layers.1.mlp"),
            _row("model.layers.2"), _row("model.layers.2.attn"), _row("model.layers.2.mlp", peak=7)]
    runs = fold_repeated(rows)
    assert [(r.row.module, r.count) for r in runs] == [
        ("model.layers.0-1", 2), ("model.layers.0-1.attn", 2), ("model.layers.0-1.mlp", 2),
        ("model.layers.2", 1), ("model.layers.2.attn", 1), ("model.layers.2.mlp", 1)]


def test_only_consecutive_indices_of_the_same_parent_fold():
    # encoder.0 and decoder.0 are different parents; layers 0 and 2 are not neighbours
    rows = [_row("decoder.0"), _row("encoder.0"), _row("layers.0"), _row("layers.2"), _row("0"), _row("1")]
    assert [(r.row.module, r.count) for r in fold_repeated(rows)] == [
        ("decoder.0", 1), ("encoder.0", 1), ("layers.0", 1), ("layers.2", 1), ("0-1", 2)]


# -- grouped tensors --------------------------------------------------------------------------------


def _tensor(name: str, module: str, nbytes: int, held: bool = False, category: str = "activations") -> TensorRow:
    return TensorRow(name, category, module, "forward", 2, [4, 8], "float32", nbytes, held)


def test_identical_tensors_of_repeated_layers_group_largest_total_first():
    rows = [_tensor("aten.mm.default", "lm_head", 1000),
            *(_tensor("aten.mul.Tensor", f"h.{i}.mlp.act", 128, held=i < 2) for i in range(12)),
            _tensor("h.0.mlp.weight", "h.0.mlp", 128, category="parameters"),
            _tensor("h.1.mlp.weight", "h.1.mlp", 128, category="parameters")]
    groups = tensor_groups(rows, top=2)
    assert path_pattern("h.11.mlp.act") == "h.*.mlp.act"
    # 12 x 128 = 1,536 B before the single 1,000 B tensor; the two parameters (256 B) are cut by top=2
    assert [(g.name, g.module, g.count, g.bytes, g.total_bytes, g.held_past_last_use_bytes) for g in groups] == [
        ("aten.mul.Tensor", "h.*.mlp.act", 12, 128, 1536, 2 * 128), ("aten.mm.default", "lm_head", 1, 1000, 1000, 0)]
    params = tensor_groups(rows, top=3)[2]
    assert (params.name, params.category, params.count, params.total_bytes) == ("h.*.mlp.weight", "parameters", 2, 256)


def _peak_with(rows: list[TensorRow]) -> Peak:
    return Peak(bytes=sum(t.bytes for t in rows), iteration=2, phase="forward", module="", op="", event=0,
                by_category={}, held_past_last_use_bytes=sum(t.bytes for t in rows if t.held_past_last_use),
                top_tensors=rows, top_tensor_groups=tensor_groups(rows, 12))


def test_past_last_use_column_shows_bytes_and_is_dropped_when_empty():
    rows = [_tensor("aten.mm.default", "lm_head", 1000), _tensor("aten.mul.Tensor", "h.0.act", 512)]
    section = sections.top_tensors(_peak_with(rows))
    assert "past last use" not in section.headers and len(section.headers) == len(section.rows[0]) == 8
    rows += [_tensor("aten.mul.Tensor", "h.1.act", 512, held=True)]
    section = sections.top_tensors(_peak_with(rows))
    # the h.*.act group (2 x 512 B) holds one of its tensors past its last use: 512 B; lm_head's mm none
    assert section.headers[-1] == "past last use"
    assert [(row[1], row[7], row[-1]) for row in section.rows] == [
        ("aten.mul.Tensor x2", "1.00 KiB", "512 B"), ("aten.mm.default", "1000 B", "")]


# -- the out-of-memory point ------------------------------------------------------------------------


def test_oom_point_is_named_by_phase_module_and_op():
    # The hand-computed MLP (tests/test_golden.py) on a 650 MiB card whose sm90 context takes 600 MiB: the caching
    # allocator may reserve 50 MiB. Forward takes the main thread's cuBLAS (32 MiB, a 32 MiB large segment) and
    # cuBLASLt (1 MiB, a 2 MiB small segment) workspaces: 34 MiB reserved; backward's first mm then asks for the
    # autograd thread's 32 MiB cuBLAS workspace: 34 + 32 = 66 > 50 MiB, out of memory.
    r = analyze("tests.fixtures.nets:mlp", inputs=("x=float32[4,16]",), target="cuda", gpu_memory=650 * MIB)
    d = r.device
    assert d["allocator_budget_bytes"] == 50 * MIB and d["context_bytes"] == 600 * MIB
    assert (d["oom_iteration"], d["oom_phase"], d["oom_module"], d["oom_op"]) == (1, "backward", "", "aten.mm.default")
    assert d["oom_request_bytes"] == 32 * MIB and d["oom_reserved_bytes"] == 34 * MIB
    # allocated then: the two forward workspaces, 33 MiB, plus the small blocks of parameters and activations
    assert 33 * MIB < d["oom_allocated_bytes"] < 34 * MIB
    # uncapped: both threads' workspaces, 2 x (32 + 2) MiB = 68 MiB reserved, + 600 MiB context = 668 MiB
    assert r.required_bytes == 668 * MIB and r.fits is False
    text = render(r, "table")
    assert "at event" not in text
    assert ("runs out in the backward pass of iteration 1, in aten.mm outside any module: it asks for 32.00 MiB "
            "with") in text
    assert "needs 668.00 MiB (up to 968.00 MiB) at the steady-state peak, 18.00 MiB more than the card has" in text
    assert "replayed as if the card had no limit" in text


# -- warnings for inputs the model was not made for -------------------------------------------------


def test_rotary_sequence_past_max_positions_is_a_warning_in_text_and_json():
    # tiny-llama: rotary, max_position_embeddings 256
    spec = resolve("tests/configs/tiny-llama.json")
    assert input_warnings(spec, TrainingOptions(seq_len=256)) == []
    (warning,) = input_warnings(spec, TrainingOptions(seq_len=257))
    assert "sequence length 257 is past this llama model's max_position_embeddings 256" in warning
    r = analyze("tests/configs/tiny-llama.json", seq_len=300, target="cpu")
    assert len(r.warnings) == 1 and "300" in r.warnings[0]
    assert f"warning: {r.warnings[0]}" in render(r, "table")
    assert json.loads(render(r, "json"))["warnings"] == r.warnings


def test_learned_positions_are_refused_not_warned():
    # gpt2's learned table cannot be indexed past: an error before tracing (tasks._within_positions), no warning
    spec = resolve("tests/configs/tiny-gpt2.json")
    assert input_warnings(spec, TrainingOptions(seq_len=1024)) == []
    from memgraph.errors import MemgraphError
    with pytest.raises(MemgraphError, match="longer than this gpt2 model's 256 learned positions"):
        spec.batch(TrainingOptions(seq_len=1024), None)


def test_image_sizes_the_processor_would_not_make():
    # Qwen2-VL's smart_resize rounds sides to multiples of patch 14 x merge 2 = 28: 450 -> 448 (16 x 28)
    qwen = resolve("tests/configs/tiny-qwen2-vl.json")
    assert input_warnings(qwen, TrainingOptions(image_size=448, seq_len=512)) == []
    (warning,) = input_warnings(qwen, TrainingOptions(image_size=450, seq_len=512))
    assert "450x450" in warning and "448x448" in warning
    # a fixed-size ViT (config image_size 32): its processor resizes every image to 32x32
    vit = resolve("tests/configs/tiny-vit.json")
    assert input_warnings(vit, TrainingOptions(image_size=32)) == []
    (warning,) = input_warnings(vit, TrainingOptions(image_size=64))
    assert "resizes every image to 32x32" in warning
    # a model whose config has no image size (HF ResNet takes any) gets none
    assert input_warnings(resolve("tests/configs/tiny-resnet.json"), TrainingOptions(image_size=64)) == []


def test_json_folded_modules_keep_per_module_rows():
    r = analyze("tests/configs/tiny-gpt2.json", seq_len=16, target="cpu")
    d = json.loads(render(r, "json", 3))
    assert d["schema_version"] == 5
    folded, rows = d["modules_folded"], d["modules"]
    # each folded row stands for `count` modules of its figures: they add up to the unfolded rows
    assert sum(f["peak_bytes"] * f["count"] for f in folded) == sum(m["peak_bytes"] for m in rows)
    assert sum(f["count"] for f in folded) == len(rows)
    for f in folded:
        assert (f["first"] is None) == (f["count"] == 1)
        if f["count"] > 1:
            assert f["last"] - f["first"] + 1 == f["count"]


# -- mixed precision that can cost more than fp32 -----------------------------------------------------


def test_mixed_precision_note_names_the_cast_copies_alive_at_the_peak():
    from memgraph.analysis.summarize import mixed_precision_note
    from memgraph.units import human_bytes

    peak = _peak_with([_tensor("aten._to_copy.default", "fc", 4096, category="autocast_cache")])
    peak.by_category = {"autocast_cache": 4096}
    (note,) = mixed_precision_note("fp16-mixed", peak)
    assert note.startswith("fp16-mixed can need more than fp32") and "float16 copy of every weight" in note
    assert f"({human_bytes(4096)} alive at the steady-state peak" in note
    assert mixed_precision_note("fp32", peak) == []  # no autocast
    peak.by_category = {"autocast_cache": 0}  # the copies are gone by the peak (an optimizer-phase peak)
    assert mixed_precision_note("bf16-mixed", peak) == []


def test_whisper_fp16_mixed_report_explains_its_cast_copies():
    # tiny Whisper: 50 source positions = 100 mel frames = 1 s; its steady peak (backward) still holds cast weights
    r = analyze("tests/configs/tiny-whisper.json", precision="fp16-mixed", audio_seconds=1.0, target_len=16)
    cache = r.steady_state_peak.by_category["autocast_cache"]
    assert cache > 0
    notes = [n for n in r.notes if n.startswith("fp16-mixed can need more than fp32")]
    assert len(notes) == 1 and notes[0] in render(r, "table")
