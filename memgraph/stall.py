"""Where a stalled analysis spends its time: the line the progress display prints after a minute without a new op.

A factory or forward that loops or sleeps forever records no op; ``--timeout`` (30 minutes by default) ends it,
but a user at a terminal should not wait that long to learn why. After :data:`STALL_SECONDS` without a new
recorded op or stage, the progress thread reads the main thread's current stack (``sys._current_frames``, a
documented function of the sys module) and names the innermost frame of the user's own code (their module
being imported, their factory, their forward), else the innermost module's ``forward``, else the innermost frame.
"""

from __future__ import annotations

import sys
import threading

from memgraph.model_spec.user_code import is_memgraph_file, is_user_file
from memgraph.trace.record import progress

STALL_SECONDS = 60.0


def activity() -> tuple:
    """Changes whenever the analysis moves on: a new stage, or a new recorded op."""
    return progress.activity()


def main_thread_location() -> str:
    """``Sleep.forward at nets.py:31`` or ``nets.py:12 (<module>)``: where the main thread is now."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    chosen = (next((f for f in stack if is_user_file(f.f_code.co_filename)), None)
              or next((f for f in stack if f.f_code.co_name == "forward" and "self" in f.f_locals
                       and not is_memgraph_file(f.f_code.co_filename)), None)
              or (stack[0] if stack else None))
    if chosen is None:
        return "an unknown place"
    code = chosen.f_code
    owner = chosen.f_locals.get("self")
    function = f"{type(owner).__name__}.{code.co_name}" if owner is not None and code.co_name != "<module>" \
        else code.co_name
    if code.co_name == "<module>":
        return f"the import of {code.co_filename}, line {chosen.f_lineno}"
    return f"{function} at {code.co_filename}:{chosen.f_lineno}"


def stall_message(seconds: float, timeout: float | None) -> str:
    stop = f"--timeout stops it after {timeout:g} s" if timeout else "Ctrl-C stops it"
    return (f"memgraph: no new op for {seconds:.0f} s while {progress.position()}: the model's code is running "
            f"{main_thread_location()} (a loop or a wait that never ends?); {stop}")
