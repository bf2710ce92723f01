"""Values a meta tensor does not have: what the script read, where, and the placeholder it got.

A meta tensor has a shape and a dtype but no data. Where the script (or a library it calls) asks for a value
(``loss.item()``, ``if torch.isfinite(loss):``, ``print(f"{loss:.3f}")``, ``.tolist()``, ``.numpy()``, a copy
to the host) it gets a placeholder, and the read is counted here with the line of the user's script that led
to it and, where different, the library line that made it. Nothing is guessed silently: the report lists
every such read (:meth:`ValueReads.notes`).
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
from collections import Counter
from dataclasses import dataclass, field

import torch

# The placeholder each kind of read gets. 1, not 0: a script that divides by a logged value (a gradient norm,
# a token count) keeps running; a bool read (``if torch.isfinite(loss):``) answers True, the branch of a
# healthy step. GradScaler's own inf/NaN check is not answered from here: it takes the finite branch
# (memgraph.private_api.GradScalerAssumingFiniteGrads), so every step runs.
PLACEHOLDER = {"float": 1.0, "int": 1, "bool": True}

_PACKAGE_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,))
_MEMGRAPH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def placeholder(dtype: torch.dtype):
    """The Python value a read of one element of ``dtype`` gets."""
    if dtype == torch.bool:
        return PLACEHOLDER["bool"]
    if dtype.is_floating_point or dtype.is_complex:
        return PLACEHOLDER["float"]
    return PLACEHOLDER["int"]


@dataclass
class ValueReads:
    """Every value read of a meta tensor, counted by (what, script line, library line)."""

    script_files: frozenset[str]  # absolute paths of the user's code (the script, or the -m module's file)
    counts: Counter = field(default_factory=Counter)

    def read(self, what: str) -> None:
        """Count one read of kind ``what`` (e.g. ``"Tensor.item() -> 1.0"``) at the current stack."""
        self.counts[(what, *self.where())] += 1

    def where(self) -> tuple[str, str]:
        """("script.py:12 `loss.item()`", "transformers/trainer.py:2410") for the current stack: the innermost
        line of the user's script, and the innermost line outside torch and memgraph when that is another file."""
        script = library = ""
        frame = sys._getframe(1)
        while frame is not None:
            name = _absolute(frame.f_code.co_filename)
            if not library and not name.startswith(_PACKAGE_DIRS) and not name.startswith(_MEMGRAPH_DIR):
                library = f"{_short(name)}:{frame.f_lineno}"
            if name in self.script_files:
                script = script_line(name, frame.f_lineno)
                break
            frame = frame.f_back
        return script, ("" if script.startswith(library.split(" ")[0]) else library)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def notes(self) -> list[str]:
        """One note per distinct read, most frequent first."""
        notes = []
        for (what, script, library), n in self.counts.most_common():
            at = script or "outside the script"
            via = f" (in {library})" if library else ""
            notes.append(f"value read on meta: {what} at {at}{via}, {n} time(s): a placeholder, not the value the "
                         "GPU run computes; a branch or shape that depends on it may differ from the real run")
        return notes


def script_line(path: str, lineno: int) -> str:
    """``train.py:31 `loss.item()``` for a line of the user's script."""
    text = linecache.getline(path, lineno).strip()
    return f"{os.path.basename(path)}:{lineno}" + (f" `{text}`" if text else "")


@functools.lru_cache(maxsize=None)
def _absolute(path: str) -> str:
    """A code object's file as an absolute path (runpy.run_path of a relative path keeps it relative)."""
    return os.path.abspath(path) if not path.startswith("<") else path


def _short(path: str) -> str:
    """A library file as ``transformers/trainer.py`` (its path below site-packages), else the base name."""
    marker = f"site-packages{os.sep}"
    return path.split(marker, 1)[1] if marker in path else os.path.basename(path)


__all__ = ["PLACEHOLDER", "ValueReads", "placeholder", "script_line"]
