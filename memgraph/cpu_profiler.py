"""torch.profiler with CPU memory events, without Kineto's console noise.

Kineto writes ``USDT: ... profiler_start`` / ``profiler_stop`` lines straight to file descriptor 2
when a session starts and stops (SyncActivityProfilerHandler.cpp in torch 2.13; no environment
variable turns them off). Only those two calls run with descriptor 2 pointed at /dev/null: what the
profiled code itself writes to stderr still shows.
"""

from __future__ import annotations

import contextlib
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from memgraph.private_api import kineto_events

MEMORY_EVENT = "[memory]"  # name torch.profiler gives allocator events (profile_memory=True)


@contextlib.contextmanager
def _native_stderr_silenced():
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def memory_profile():
    """A CPU profiling session with memory events; yields the ``torch.profiler.profile`` object."""
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _native_stderr_silenced():
        prof.__enter__()
    try:
        yield prof
    finally:
        with _native_stderr_silenced():
            prof.__exit__(*sys.exc_info())


def cpu_memory_events(prof) -> list[tuple[int, int]]:
    """(time in ns, +bytes allocated / -bytes freed) of every CPU allocator event, in time order.

    The sort is stable: events with the same timestamp keep their recorded order."""
    events = [(e.start_ns(), e.nbytes()) for e in kineto_events(prof)
              if e.name() == MEMORY_EVENT and e.device_type() == torch.autograd.DeviceType.CPU]
    events.sort(key=lambda m: m[0])
    return events
