"""The random ops of a checkpointed region under ``--compile`` (``--gradient-checkpointing``).

AOTAutograd functionalizes the RNG of a region that ``torch.utils.checkpoint`` recomputes: Inductor's code runs each
random op (dropout, SDPA's kernels, which take a dropout probability) through the higher-order op
``run_and_save_rng_state``, which returns the generator's state beside the op's output, and its backward recomputes
the op with ``run_with_rng_state(state, op, ...)`` (torch 2.13 torch/_prims/rng_prims.py). On the CPU the state is
a new CPU tensor (``torch.get_rng_state()``, the CPU generator's state as bytes), allocated through the CPU allocator
and kept for backward: it counts on the cpu target. ``torch.cuda.get_rng_state()`` is a host tensor too: it is not
device memory on the cuda target. The op itself runs under the recorder as any other.
"""

from __future__ import annotations

import contextlib

import torch

from memgraph.private_api import CUDA_RNG_STATE_BYTES, rng_state_hops_for


def _save(mode, op, *args, **kwargs):
    if getattr(mode, "host_type", None) != "cpu":  # cuda target: torch.cuda.get_rng_state()'s host tensor, not
        # recorded (it is not device memory); its 16 bytes are what Inductor's code checks the output against
        with mode:
            output = op(*args, **kwargs)
        return torch.empty(CUDA_RNG_STATE_BYTES, dtype=torch.uint8), output
    state = torch.get_rng_state()  # the state's size and dtype as the CPU generator gives them (no recorded op)
    with mode:  # cpu target: the host is the device, the state counts
        state = torch.empty(state.shape, dtype=state.dtype, device="cpu")
        return state, op(*args, **kwargs)


def _run_with(mode, rng_state, op, *args, **kwargs):
    with mode:
        return op(*args, **kwargs)


def rng_state_ops_recorded() -> contextlib.AbstractContextManager:
    """While open, the RNG higher-order ops run their op under the trace's recorder (memgraph/trace/record)."""
    from memgraph.trace.parallel.distributed import DistributedRecorder
    from memgraph.trace.record.recorder import Recorder

    return rng_state_hops_for((Recorder, DistributedRecorder), _save, _run_with)
