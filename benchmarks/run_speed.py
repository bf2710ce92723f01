"""``memgraph run`` against the same script executed plainly on meta, side by side.

    python benchmarks/run_speed.py            # examples/scripts/nanogpt_train.py at GPT-2 small: 124M, batch 12 x 1024
    python benchmarks/run_speed.py SCRIPT.py [ARGS...]

Both run the script unmodified in this process until it has made ``STEPS`` optimizer steps:
1. plainly on meta: the least any tool needs to execute a CUDA script without a GPU: ``cuda`` mapped to meta and
   value reads answered (memgraph/script_run/device_mode.py), ``torch.cuda`` answering (cuda_stand_in.py), fused
   optimizers admitted on meta, stopped by an optimizer-step hook; no recorder, no values, no emulation;
2. ``memgraph run`` (run_script + the analysis and allocator replay of ``result_of_trace``).
Each is timed in CPU seconds of this process (``time.process_time``). The issue's bound: (2) costs at most the
plain execution plus 1.5x, i.e. ratio <= 2.5. Prints figures; asserts nothing. On the shared 2-core development
machine wall-clock figures are noisy; the ratio is measured in one process, plain run first.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from memgraph.api import result_of_trace
from memgraph.facts.gpus import get_gpu
from memgraph.model_spec.options import TrainingOptions
from memgraph.private_api import foreach_kernels_also_on, grad_scalers_assume_finite_grads
from memgraph.script_run.cuda_stand_in import AutocastEmulations, DeviceCounters, cuda_stand_in
from memgraph.script_run.device_mode import ScriptDeviceMode
from memgraph.script_run.loop_watch import StopScript
from memgraph.script_run.runner import ScriptCommand, _script_argv, _swapped_on_conversion, run_script
from memgraph.script_run.value_reads import ValueReads
from memgraph.trace.record.event_log import EventLog
from memgraph.step.fused_optimizers import fused_on_meta

STEPS = 3
GPT2_SMALL = [str(Path(__file__).resolve().parent.parent / "examples" / "scripts" / "nanogpt_train.py"),
              "--n_layer=12", "--n_head=12", "--n_embd=768", "--batch_size=12", "--block_size=1024",
              "--vocab_size=50304", "--gradient_accumulation_steps=1"]


def plain(command: ScriptCommand) -> None:
    script = command.check()
    done = [0]

    def stop(*_):
        done[0] += 1
        if done[0] >= STEPS:
            raise StopScript

    handle = register_optimizer_step_post_hook(stop)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_script_argv(command, script))
        stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        stack.enter_context(cuda_stand_in(get_gpu(TrainingOptions().gpu), DeviceCounters(EventLog(), "cuda"),
                                          AutocastEmulations(lambda t: None)))
        for ctx in (foreach_kernels_also_on("meta"), _swapped_on_conversion(), fused_on_meta(),
                    grad_scalers_assume_finite_grads(),
                    ScriptDeviceMode("cuda", ValueReads(frozenset({script})), lambda: None)):
            stack.enter_context(ctx)
        try:
            command.run()
        except StopScript:
            pass
        finally:
            handle.remove()


def memgraph_run(command: ScriptCommand) -> int:
    opts = TrainingOptions(iterations=STEPS)
    trace, _ = run_script(command, opts)
    return result_of_trace(command.name, opts, trace).steady_state_peak.bytes


def main(argv: list[str]) -> None:
    command = ScriptCommand(tuple(argv or GPT2_SMALL))
    torch.manual_seed(0)
    t0 = time.process_time()
    plain(command)
    t_plain = time.process_time() - t0
    t0 = time.process_time()
    peak = memgraph_run(command)
    t_run = time.process_time() - t0
    print(f"{command.name} {' '.join(command.args)}")
    print(f"plain meta execution: {t_plain:.1f} CPU s")
    print(f"memgraph run:         {t_run:.1f} CPU s (steady-state peak {peak:,} B)")
    print(f"ratio: {t_run / t_plain:.2f} (bound: 2.5, the plain execution plus 1.5x)")


if __name__ == "__main__":
    main(sys.argv[1:])
