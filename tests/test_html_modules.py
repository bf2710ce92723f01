"""The HTML report's per-module icicle: the module tree of the bytes at the peak, repeated layers folded
(with their sum), chains joined, and blocks whose widths add up to the peak."""

from __future__ import annotations

import re
from dataclasses import replace

from memgraph.analysis.result import ModuleRow
from memgraph.render.html_modules import TOP_LEVEL, W, compact, fold, icicle, label_of, tree
from memgraph.units import human_bytes
from tests.test_report_html import _result


def _layers(n: int, extra_in_last: bool = False) -> list[ModuleRow]:
    """n decoder layers with attn and mlp; layer i holds 100 + i bytes in attn and 1000 in mlp."""
    rows = []
    for i in range(n):
        rows += [ModuleRow(module=f"model.layers.{i}.attn", peak_bytes=100 + i),
                 ModuleRow(module=f"model.layers.{i}.mlp", peak_bytes=1000)]
    if extra_in_last:
        rows.append(ModuleRow(module=f"model.layers.{n - 1}.adapter", peak_bytes=7))
    return rows + [ModuleRow(module="model.embed", peak_bytes=5000), ModuleRow(module="", peak_bytes=300)]


def _result_with(rows: list[ModuleRow]):
    r = _result()
    total = sum(m.peak_bytes for m in rows)
    return replace(r, modules=rows, steady_state_peak=replace(r.steady_state_peak, bytes=total))


def test_identical_layers_fold_into_one_block():
    """Four identical layers: one block ``layers.0-3 x4`` (the chain model.layers + 0-3 joined) holding
    4 x 1000 + (100 + 101 + 102 + 103) = 4406 bytes; each layer 1100 to 1103."""
    root = compact(fold(tree(_result_with(_layers(4)))))
    model = root.children["model"]
    assert list(model.children) == ["embed", "layers"]
    layers = model.children["layers"]
    assert label_of(layers) == "layers.0-3 x4" and layers.path == "model.layers.0-3"
    assert layers.bytes == 4406 and layers.each == (1100, 1103)
    assert layers.children["attn"].bytes == 406 and layers.children["mlp"].bytes == 4000
    assert layers.children["attn"].path == "model.layers.0-3.attn"
    assert list(root.children) == ["model", TOP_LEVEL] and root.children[TOP_LEVEL].bytes == 300
    assert root.bytes == 4406 + 5000 + 300


def test_a_different_layer_stays_apart():
    """Layer 3 has an adapter the others lack: layers 0-2 fold (3 x 1000 + 100 + 101 + 102 = 3303), 3 stays."""
    layers = compact(fold(tree(_result_with(_layers(4, extra_in_last=True))))).children["model"].children["layers"]
    assert [label_of(c) for c in layers.children.values()] == ["0-2 x3", "3"]
    assert layers.children["0-2"].bytes == 3303 and layers.children["3"].bytes == 1000 + 103 + 7


def test_blocks_add_up_to_the_peak():
    r = _result_with(_layers(32))
    svg = icicle(r)
    blocks = dict(re.findall(r'<g class="block" data-path="([^"]*)" data-bytes="(\d+)"', svg))
    assert int(blocks[""]) == r.steady_state_peak.bytes == sum(m.peak_bytes for m in r.modules)
    assert int(blocks["model.layers.0-31"]) == 32 * 1000 + sum(100 + i for i in range(32))
    assert "layers.0-31 x32" in svg and f"32 layers, {human_bytes(1100)} to {human_bytes(1131)} each" in svg
    widths = {p: float(w) for p, w in re.findall(
        r'data-path="([^"]*)" data-bytes="\d+"><title>[^<]*</title><rect x="[\d.]+" y="\d+" width="([\d.]+)"', svg)}
    assert widths[""] == W - 1  # the whole step spans the picture (1 px gap between blocks)


def test_nothing_at_the_peak_draws_nothing():
    assert icicle(_result_with([ModuleRow(module="model.x", peak_bytes=0)])) == ""
