"""Watching a running analysis: a progress line on a terminal, and a time budget (``--timeout``).

The progress line is drawn on standard error by a daemon thread twice a second, only when standard error
is a terminal (nothing when it is piped or redirected, so logs and scripts stay clean), and erased when
the work ends. The time budget is a ``SIGALRM`` timer in the main thread: when it fires, the handler
raises :class:`AnalysisTimeout` wherever the trace is, and the message names the stage, iteration,
phase, module and op it had reached (:func:`memgraph.trace.record.progress.position`).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time

from memgraph import stall
from memgraph.errors import MemgraphError
from memgraph.trace.record import progress

REFRESH_SECONDS = 0.5


class AnalysisTimeout(MemgraphError):
    """The analysis ran past ``--timeout``."""


@contextlib.contextmanager
def progress_line(stream=None, enabled: bool | None = None, timeout: float | None = None):
    """Show ``memgraph: tracing: iteration 1, backward, 12,345 ops, 3.1 s`` on ``stream`` while the block runs,
    and, after ``stall.STALL_SECONDS`` without a new op, a line saying where the model's code is
    (memgraph/stall.py); ``timeout``: the --timeout that line mentions."""
    stream = stream or sys.stderr
    if enabled is None:
        enabled = hasattr(stream, "isatty") and stream.isatty()
    if not enabled:
        yield
        return
    stop = threading.Event()
    start = time.monotonic()

    def draw() -> None:
        width = 0
        last, moved, told = stall.activity(), time.monotonic(), False
        while not stop.wait(REFRESH_SECONDS):
            now, seen = time.monotonic(), stall.activity()
            if seen != last:
                last, moved, told = seen, now, False
            elif not told and now - moved >= stall.STALL_SECONDS:
                stream.write("\r" + " " * width + "\r" + stall.stall_message(now - moved, timeout) + "\n")
                told, width = True, 0
            line = f"memgraph: {progress.position(short=True)}, {time.monotonic() - start:.1f} s"
            stream.write("\r" + line.ljust(width))
            stream.flush()
            width = len(line)
        stream.write("\r" + " " * width + "\r")  # erase: the report or the error starts on a clean line
        stream.flush()

    thread = threading.Thread(target=draw, name="memgraph-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def time_budget(seconds: float | None):
    """Raise :class:`AnalysisTimeout` in the main thread once ``seconds`` have passed (None: no budget)."""
    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expired(signum, frame):
        raise AnalysisTimeout(f"stopped after {seconds:g} s (--timeout) while {progress.position()}: "
                              "pass a larger --timeout, or a smaller model or fewer iterations")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
