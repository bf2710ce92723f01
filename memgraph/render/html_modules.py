"""The HTML report's per-module view: an icicle of the bytes alive at the steady-state peak.

One row per depth of the module tree, each module as wide as the bytes its storages hold at the
peak (``ModuleRow.peak_bytes``: its own, attributed as in analysis/group_by.py, plus its
submodules'); the part of a parent not covered by its children is its own. Repeated layers are
folded: siblings named by consecutive integers whose subtrees have the same module paths become one
block, ``layers.0-31 x32``, holding their sum (its hover text gives the range of one layer).
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from html import escape

from memgraph.analysis.group_by import module_order
from memgraph.analysis.result import Result
from memgraph.render.html_labels import text_width
from memgraph.units import human_bytes, share

W = 1180
ROW = 30  # pixels per depth
MAX_ROWS = 7  # the whole step and six levels of modules
FONT = 12.0
TOP_LEVEL = "(top level)"
HUES = (212, 28, 140, 275, 350, 95, 185, 50)  # one hue per top-level module, lighter with depth


def _e(value) -> str:
    return escape(str(value), quote=True)


@dataclass
class Node:
    name: str  # the path part ("layers", "0-31")
    path: str  # the full path, folded parts included ("model.layers.0-31")
    own: int = 0  # bytes attributed to this module itself
    children: dict[str, Node] = field(default_factory=dict)
    count: int = 1  # layers folded into this node
    each: tuple[int, int] = (0, 0)  # folded: the smallest and largest layer's bytes

    @property
    def bytes(self) -> int:
        return self.own + sum(c.bytes for c in self.children.values())

    def shape(self) -> tuple[str, ...]:
        """The relative paths of the subtree: what makes two layers the same."""
        return tuple(sorted(p for name, c in self.children.items() for p in (name, *(f"{name}.{q}" for q in c.shape()))))


def tree(r: Result) -> Node:
    """The module tree, with each path's own bytes at the steady-state peak."""
    root = Node("", "")
    for m in r.modules:
        node = root
        for part in (m.module.split(".") if m.module else []):
            node = node.children.setdefault(part, Node(part, f"{node.path}.{part}" if node.path else part))
        node.own += m.peak_bytes
    if root.own:  # the top level's own bytes (the loss, the logits the loop holds) as a block of their own
        root.children[TOP_LEVEL] = Node(TOP_LEVEL, TOP_LEVEL, root.own)
        root.own = 0
    return root


def _merge(into: Node, other: Node) -> None:
    into.own += other.own
    for name, child in other.children.items():
        if name in into.children:
            _merge(into.children[name], child)
        else:
            into.children[name] = child


def _rename(node: Node, path: str) -> None:
    node.path = path
    for name, child in node.children.items():
        _rename(child, f"{path}.{name}")


def fold(node: Node) -> Node:
    """Fold, bottom-up, runs of consecutive integer-named siblings with the same subtree shape."""
    for child in node.children.values():
        fold(child)
    items = list(node.children.items())
    out: dict[str, Node] = {}
    i = 0
    while i < len(items):
        name, child = items[i]
        j = i + 1
        if name.isdigit():
            while (j < len(items) and items[j][0].isdigit() and int(items[j][0]) == int(items[j - 1][0]) + 1
                   and items[j][1].shape() == child.shape()):
                j += 1
        if j - i >= 2:
            run = [c for _, c in items[i:j]]
            folded_name = f"{name}-{items[j - 1][0]}"
            sizes = [c.bytes for c in run]
            folded = Node(folded_name, "", count=len(run), each=(min(sizes), max(sizes)))
            for c in run:
                _merge(folded, deepcopy(c))
            _rename(folded, f"{node.path}.{folded_name}" if node.path else folded_name)
            out[folded_name] = folded
        else:
            out[name] = child
        i = j
    node.children = dict(sorted(out.items(), key=lambda kv: (kv[0] == TOP_LEVEL, module_order(kv[0].split("-")[0]))))
    return node


def compact(node: Node, root: bool = True) -> Node:
    """Join a module that holds nothing itself to its only child (``layers`` + ``0-31`` -> ``layers.0-31``)."""
    while not root and len(node.children) == 1 and not node.own and node.count == 1:
        (child,) = node.children.values()
        node.name, node.path, node.children = f"{node.name}.{child.name}", child.path, child.children
        node.own, node.count, node.each = child.own, child.count, child.each
    for child in node.children.values():
        compact(child, root=False)
    return node


def label_of(node: Node) -> str:
    return f"{node.name} x{node.count}" if node.count > 1 else node.name


def _tip(node: Node, total: int) -> str:
    name = f"{node.path or '(whole step)'}{f' x{node.count}' if node.count > 1 else ''}"
    parts = [f"{name}: {human_bytes(node.bytes)} ({node.bytes:,} B, {share(node.bytes, total)} of the peak)"]
    if node.count > 1:
        parts.append(f"{node.count} layers, {human_bytes(node.each[0])} to {human_bytes(node.each[1])} each")
    if node.own and node.children:
        parts.append(f"its own (not in a submodule): {human_bytes(node.own)}")
    return "; ".join(parts)


def _fit_text(text: str, width: float) -> str:
    """``text`` cut to fit ``width`` pixels (with an ellipsis), or "" if not even three characters fit."""
    if text_width(text, FONT) <= width:
        return text
    n = int(width / text_width("x", FONT)) - 1
    return text[:n] + "\u2026" if n >= 3 else ""


def _blocks(node: Node, x: float, scale: float, depth: int, hue: int, total: int, out: list[str]) -> None:
    w = node.bytes * scale
    if w < 1 or depth >= MAX_ROWS:
        return
    y = depth * ROW
    light = min(52 + 7 * depth, 88)
    fill = "#52606d" if depth == 0 else "#cbd2d9" if node.path == TOP_LEVEL else f"hsl({hue},55%,{light}%)"
    ink = "#fff" if depth == 0 else "#1f2933"
    name = "whole step at the peak" if depth == 0 else label_of(node)
    text = _fit_text(f"{name}  {human_bytes(node.bytes)}", w - 8) or _fit_text(name, w - 8)
    out.append(f'<g class="block" data-path="{_e(node.path)}" data-bytes="{node.bytes}"><title>{_e(_tip(node, total))}'
               f'</title><rect x="{x:.1f}" y="{y}" width="{max(w - 1, 0.5):.1f}" height="{ROW - 2}" fill="{fill}"/>'
               + (f'<text x="{x + 5:.1f}" y="{y + ROW / 2 + 3.5}" font-size="{FONT}" fill="{ink}">{_e(text)}</text>'
                  if text else "") + "</g>")
    cx = x
    for i, child in enumerate(node.children.values()):
        _blocks(child, cx, scale, depth + 1, HUES[i % len(HUES)] if depth == 0 else hue, total, out)
        cx += child.bytes * scale


def icicle(r: Result) -> str:
    """The icicle as inline SVG; "" when no module holds anything at the peak."""
    root = compact(fold(tree(r)))
    total = root.bytes
    if total <= 0:
        return ""
    rows = min(MAX_ROWS, _depth(root) + 1)
    out: list[str] = []
    _blocks(root, 0.0, W / total, 0, 0, total, out)
    return (f'<figure class="chart"><svg class="icicle" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {rows * ROW}" '
            f'role="img" aria-label="bytes alive at the steady-state peak by module">{"".join(out)}</svg></figure>')


def _depth(node: Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=-1)


def icicle_section_text(r: Result) -> str:
    return ("Bytes alive at the steady-state peak by module, one row per depth of the module path: each block is as wide as what its module holds "
            "(parameters, their gradients and optimizer state, and the activations and temporaries made while it "
            "ran), the rest of its parent is the parent's own; repeated layers are folded into one block "
            "(<code>layers.0-31 x32</code>) holding their sum. Hover a block for its bytes.")
