"""Labels for points of an SVG chart, placed so that no two overlap.

A greedy placement, in priority order: each label tries boxes above its point at growing distances
(right of the point, left of it, centred), then below it, and takes the first one inside the
bounds that meets no box already taken; a label that finds none is left out (its point keeps its
hover text). Text widths are estimated from the character count (no font metrics without a
browser), generously, so that a box holds its text in the common sans-serif fonts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHAR_EM = 0.62  # estimated advance of one character in em: above the ~0.55 average of Arial/DejaVu Sans digits
LINE_GAP = 3  # pixels between the two lines of a label
PAD = 3  # pixels kept free around every box


def text_width(text: str, size: float) -> float:
    return CHAR_EM * size * len(text)


@dataclass
class Label:
    """One label for the point (x, y): a bold first line and an optional smaller second line."""

    x: float
    y: float
    text: str
    color: str
    sub: str = ""
    size: float = 12.5
    sub_size: float = 11.0
    box: tuple[float, float, float, float] | None = field(default=None)  # placed: (x0, y0, x1, y1)

    @property
    def width(self) -> float:
        return max(text_width(self.text, self.size), text_width(self.sub, self.sub_size) if self.sub else 0.0)

    @property
    def height(self) -> float:
        return self.size + (LINE_GAP + self.sub_size if self.sub else 0.0)


Box = tuple[float, float, float, float]


def overlaps(a: Box, b: Box, pad: float = PAD) -> bool:
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def _candidates(label: Label, bounds: Box, step: float):
    """Boxes for ``label``: above its point at growing distances, then below; right, left, then centred."""
    w, h = label.width, label.height
    x0s = (label.x + 7, label.x - 7 - w, label.x - w / 2)
    dy = 9.0
    while label.y - dy - h >= bounds[1] or label.y + dy + h <= bounds[3]:
        for top in (label.y - dy - h, label.y + dy):
            for x0 in x0s:
                yield (x0, top, x0 + w, top + h)
        dy += step


def place(labels: list[Label], bounds: Box, taken: list[Box] = (), step: float = 8.0) -> list[Label]:
    """Give each label, in order, the first free box within ``bounds``; returns the labels placed.

    ``taken``: boxes already in use (other labels, markers). Placed boxes never overlap each other
    or ``taken`` (``PAD`` pixels apart), and lie inside ``bounds``.
    """
    used = list(taken)
    placed = []
    for label in labels:
        for box in _candidates(label, bounds, step):
            inside = box[0] >= bounds[0] and box[2] <= bounds[2] and box[1] >= bounds[1] and box[3] <= bounds[3]
            if inside and not any(overlaps(box, other) for other in used):
                label.box = box
                used.append(box)
                placed.append(label)
                break
    return placed
