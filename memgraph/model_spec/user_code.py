"""When the user's own code fails (their module at import, their factory, their model's forward), the user's
error: one line that says what failed and where, in their file, never memgraph's "internal error".

Where: the innermost frame of the traceback that is the user's file, i.e. neither memgraph's own package nor an
installed library or the standard library (site-packages, the interpreter's lib folder, frozen modules).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from memgraph.errors import MemgraphError

_MEMGRAPH = str(Path(__file__).resolve().parent.parent) + os.sep


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} | {sys.prefix, sys.base_prefix}
    return tuple(str(Path(r).resolve()) + os.sep for r in roots if r)


_LIBRARIES = _library_roots()


def is_memgraph_file(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_MEMGRAPH)


def is_user_file(filename: str) -> bool:
    """Not memgraph, not an installed package or the standard library, not a frozen or generated module."""
    if filename.startswith("<"):
        return False
    resolved = str(Path(filename).resolve())
    return not resolved.startswith(_MEMGRAPH) and not resolved.startswith(_LIBRARIES)


def frames(tb) -> list:
    """The traceback's frames, outermost first."""
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def user_location(exc: BaseException) -> str | None:
    """``file.py:12`` of the innermost frame in the user's own code, or None."""
    if isinstance(exc, SyntaxError) and exc.filename and is_user_file(exc.filename):
        return f"{_short(exc.filename)}:{exc.lineno}"
    for tb in reversed(frames(exc.__traceback__)):
        name = tb.tb_frame.f_code.co_filename
        if is_user_file(name):
            return f"{_short(name)}:{tb.tb_lineno}"
    return None


# Frames that only pass a call on (memgraph's torch function and dispatch modes call ``func(*args)``): an
# exception raised below them was raised by the call, i.e. by the code that made it.
_PASS_THROUGH = ("__torch_function__", "__torch_dispatch__")


def innermost_is_memgraph(exc: BaseException) -> bool:
    """Whether the exception was raised in memgraph's own code (its bug), not in the model's or a library's."""
    tbs = [tb for tb in frames(exc.__traceback__) if tb.tb_frame.f_code.co_name not in _PASS_THROUGH]
    return bool(tbs) and is_memgraph_file(tbs[-1].tb_frame.f_code.co_filename)


def describe(exc: BaseException) -> str:
    """``TypeError: can't convert ...`` in one line (a SyntaxError's message without its file and line)."""
    text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    first = first if len(first) <= 300 else first[:300] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def import_failure(module: str, ref: str, exc: BaseException) -> MemgraphError:
    """The user's module failed while Python imported it (a syntax error, a bad encoding, an exception)."""
    where = user_location(exc)
    at = f" at {where}" if where else ""
    what = "has a syntax error" if isinstance(exc, SyntaxError) else "raised while being imported"
    return MemgraphError(f"module {module!r} of model {ref!r} {what}{at}: {describe(exc)}: fix the module")


def call_failure(what: str, exc: BaseException, hint: str) -> MemgraphError:
    """The user's (or the model's library's) code failed while memgraph ran it: ``what`` failed, where, and why."""
    where = user_location(exc)
    at = f" at {where}" if where else ""
    return MemgraphError(f"{what}{at}: {describe(exc)}: {hint}")


def _short(filename: str) -> str:
    try:
        return os.path.relpath(filename)
    except ValueError:
        return filename
