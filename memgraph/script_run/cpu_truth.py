"""Ground truth for ``memgraph run --target cpu``: the same script run for real on the CPU, measured as
``memgraph measure --device cpu`` measures (torch.profiler's memory events, memgraph/measure/cpu.py).

The script runs unpatched (it takes its CPU path on a machine without CUDA); only global hooks are added: the
iterations are delimited exactly as :class:`memgraph.script_run.loop_watch.LoopWatch` delimits them (iteration k
from the first forward after step k-1 to the first forward after step k; the last ends with step ``steps``),
each inside a ``record_function`` range, and the script is stopped after ``steps`` optimizer steps.
"""

from __future__ import annotations

import contextlib
import gc
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import record_function

from memgraph.cpu_profiler import memory_profile
from memgraph.measure.cpu import per_iteration
from memgraph.private_api import current_graph_task_id
from memgraph.script_run.loop_watch import StopScript
from memgraph.script_run.runner import ScriptCommand, script_argv


class _Ranges:
    """One ``memgraph_iteration_k`` profiler range per iteration, opened and closed by the loop's hooks."""

    def __init__(self, steps: int):
        self.steps, self.done, self.open = steps, 0, None
        self.opened = 0

    def forward_pre(self, module, *_):
        if current_graph_task_id() != -1 or self.opened > self.done:
            return
        self._close()
        self.opened += 1
        self.open = record_function(f"memgraph_iteration_{self.opened}")
        self.open.__enter__()

    def step_post(self, *_):
        if not self.opened:
            return
        self.done += 1
        if self.done >= self.steps:
            self._close()
            raise StopScript

    def _close(self):
        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None


def measure_script_cpu(command: ScriptCommand, steps: int) -> dict:
    """Run ``command`` for real on the CPU for ``steps`` optimizer steps; the CPU allocator's peak per iteration."""
    script = command.check()
    ranges = _Ranges(steps)
    gc.collect()
    handles = [torch.nn.modules.module.register_module_forward_pre_hook(ranges.forward_pre),
               register_optimizer_step_post_hook(ranges.step_post)]
    try:
        with memory_profile() as prof, script_argv(command, script), contextlib.redirect_stdout(sys.stderr):
            try:
                command.run()
            except StopScript:
                pass
    finally:
        for h in handles:
            h.remove()
    return {"script": list(command.argv), "steps": ranges.done, "iterations": per_iteration(prof, ranges.done)}


__all__ = ["measure_script_cpu"]
