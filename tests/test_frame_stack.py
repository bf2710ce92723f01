"""memgraph/frame_stack.py: a call under ``on_deep_frame_stack`` does not map a chunk of CPython's frame stack per
call (Python 3.11+; nothing to check on 3.10, where frames are heap objects)."""

from __future__ import annotations

import resource

import pytest

from memgraph.frame_stack import FRAME_STACK_CHUNKS, on_deep_frame_stack

pytestmark = pytest.mark.skipif(not FRAME_STACK_CHUNKS, reason="CPython < 3.11 has no chunked frame stack")

CALLS = 2000


def _large_frame():
    return None


# 100,000 slots of 8 bytes: never fits the rest of an ordinary 16 KiB chunk, so CPython's push_chunk maps a chunk
# of 1 MiB (the power of two over (100,000 + 1000) slots) for every call and unmaps it on return
_large_frame.__code__ = _large_frame.__code__.replace(co_stacksize=100_000)


def _calls() -> None:
    for _ in range(CALLS):
        _large_frame()


def _page_faults(fn) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_deep_frame_stack_maps_no_chunk_per_call():
    # each freshly mapped chunk faults at least once when its first page is written: >= one fault per call
    assert _page_faults(_calls) >= CALLS
    # under the 8 MiB chunk every call fits in the 4 MiB after the large frame: the pages it writes are faulted
    # in once (a few), not per call; 100 leaves room for the interpreter's own allocations in between
    assert _page_faults(on_deep_frame_stack(_calls)) < 100


def test_deep_frame_stack_returns_and_raises_as_the_function():
    assert on_deep_frame_stack(lambda a, b=2: a + b)(1, b=3) == 4
    with pytest.raises(ValueError, match="bad"):
        on_deep_frame_stack(lambda: (_ for _ in ()).throw(ValueError("bad")))()
    assert on_deep_frame_stack(_calls).__name__ == "_calls"
