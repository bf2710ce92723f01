"""The trace's Python frames on one large chunk of CPython's frame stack, where they would otherwise map and unmap
16 KiB hundreds of thousands of times.

CPython 3.11 and later keep a thread's Python frames on a stack of chunks (Python/pystate.c ``push_chunk``,
3.11 to 3.13). A frame that does not fit in the current chunk gets a new one: ``DATA_STACK_CHUNK_SIZE``
(16 KiB), or the next power of two that holds the frame and ``MINIMUM_OVERHEAD`` (1000) more slots. The chunk
is mapped through the object arena allocator (``mmap``) and unmapped as soon as the frame at its base returns
(``_PyThreadState_PopFrame``). A call made in a loop across a chunk's boundary therefore maps, touches and
unmaps a chunk on every call. Dynamo, AOTAutograd and Inductor recurse deeply and do this all the time.
Measured on the development machine (Python 3.11.7, torch 2.13.0, `strace -c`), `memgraph analyze llama-3-8b
--compile --precision bf16-mixed -s 4096 --gpu h100-80gb` made 621,128 ``munmap`` calls. Its kernel time was
5.3 CPU s of 62.8.

:func:`on_deep_frame_stack` runs a function under one frame whose code declares an operand stack of
``STACK_SLOTS`` slots (``co_stacksize``, set with the public ``CodeType.replace``). CPython then maps one chunk
of 8 MiB for that frame: 4 MiB for it and 4 MiB free after it, where every deeper frame of the trace fits
(about 500 slots of 8 bytes is a large frame; Inductor raises the recursion limit to 2,000 frames). Only
the pages the frames use are ever touched, and the chunk is unmapped once, when the function returns. The same
analysis then makes about 1,000 ``mmap`` calls in all: 0.9 CPU s of kernel time, 58.6 CPU s in all, the same
report. Nothing a trace records depends on it: the frame stack is CPython's memory, not torch's.

On Python 3.10 (frames are heap objects there) and other interpreters it does nothing.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

T = TypeVar("T")

# 2**19 slots of 8 bytes: with the frame's own slots and MINIMUM_OVERHEAD, push_chunk's power of two is 8 MiB
STACK_SLOTS = 1 << 19
FRAME_STACK_CHUNKS = sys.implementation.name == "cpython" and sys.version_info >= (3, 11)


def _call(fn, args, kwargs):
    return fn(*args, **kwargs)


if FRAME_STACK_CHUNKS:
    _call.__code__ = _call.__code__.replace(co_stacksize=STACK_SLOTS)


def on_deep_frame_stack(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn``, each call of it made from the large frame of the module docstring (nests: an inner call maps its
    own 8 MiB chunk once)."""
    if not FRAME_STACK_CHUNKS:
        return fn

    @functools.wraps(fn)
    def deep(*args, **kwargs):
        return _call(fn, args, kwargs)

    return deep
