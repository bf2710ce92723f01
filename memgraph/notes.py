"""A trace note as data: a template, its fields, and which fields are counts that follow the model's depth.

A trace's notes (``Trace.notes``, then ``Result.notes``) say what the trace emulated, assumed or counted. A
producer whose note carries numbers that grow with the layers (SDPA calls, autocast casts, adapter tensors)
makes it a :class:`Note`: its text is ``template.format(**fields)``, made in one place (:meth:`Note.text`),
and the fields named in ``per_layer`` are integer counts (or byte counts) that each copy of a repeated layer adds to equally.
Depth synthesis (memgraph/trace/shortcuts/depth_run.py) moves those fields along the line through their values
at two depths (:meth:`Note.at_depth`) instead of reading numbers back out of the words.

A :class:`Note` is a ``str`` (its text): every consumer that reads notes as text (the renderers, the JSON
report, tests, code that checks ``note.startswith(...)``) keeps working unchanged, and a plain ``str`` stays a
valid note everywhere. Depth synthesis treats a plain ``str`` that differs between depths as it always has
(a third trace and a check that its numbers are affine in the depth).
"""

from __future__ import annotations

import string
from typing import Any

from memgraph.units import human_bytes


class _Formatter(string.Formatter):
    """``str.format`` with one more format spec: ``{field:bytes}`` writes a byte count as units.human_bytes does."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return human_bytes(value) if format_spec == "bytes" else super().format_field(value, format_spec)


_FORMAT = _Formatter()


class Note(str):
    """One note: ``template.format(**fields)`` (``{name:bytes}`` as human_bytes), with the fields kept; ``per_layer``
    names the count fields."""

    template: str
    fields: tuple[tuple[str, Any], ...]
    per_layer: frozenset[str]

    def __new__(cls, template: str, /, per_layer: tuple[str, ...] | frozenset[str] = (), **fields: Any) -> "Note":
        unknown = set(per_layer) - set(fields)
        if unknown:
            raise ValueError(f"per_layer names fields the note does not have: {sorted(unknown)}")
        self = super().__new__(cls, _FORMAT.format(template, **fields))
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "fields", tuple(fields.items()))
        object.__setattr__(self, "per_layer", frozenset(per_layer))
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Note is immutable")

    def __reduce__(self):  # pickle and copy rebuild the record, not a plain str
        return _rebuild, (self.template, tuple(sorted(self.per_layer)), self.fields)

    def text(self) -> str:
        """The note's words (the same characters as the note itself)."""
        return str.__str__(self)

    def same_kind(self, other: object) -> bool:
        """Whether ``other`` is a Note of this template whose fields differ at most in the per-layer counts."""
        return (isinstance(other, Note) and other.template == self.template and other.per_layer == self.per_layer
                and [k for k, _ in other.fields] == [k for k, _ in self.fields]
                and all(v == w for (k, v), (_, w) in zip(self.fields, other.fields) if k not in self.per_layer))

    def at_depth(self, other: "Note", lo: int, hi: int, depth: int) -> "Note":
        """This note (at ``lo`` layers) with each per-layer count moved along the line through its value here
        and in ``other`` (the note at ``hi`` layers) to ``depth`` layers: ``v_lo + (v_hi - v_lo) / (hi - lo) *
        (depth - lo)``. Raises ValueError where the notes are not of one kind or a count is not a whole number
        per layer."""
        if not self.same_kind(other):
            raise ValueError("the trace's notes change with the depth")
        fields = dict(self.fields)
        theirs = dict(other.fields)
        for name in self.per_layer:
            slope, rest = divmod(theirs[name] - fields[name], hi - lo)
            if rest:
                raise ValueError(f"{name} in a trace note is not a whole number per layer")
            fields[name] += slope * (depth - lo)
        return Note(self.template, per_layer=self.per_layer, **fields)


def _rebuild(template: str, per_layer: tuple[str, ...], fields: tuple[tuple[str, Any], ...]) -> Note:
    return Note(template, per_layer=per_layer, **dict(fields))


__all__ = ["Note"]
